// Package faults is Warren's fault harness of real processes: n `warren
// serve` processes, each in its own Linux network namespace on a private
// bridge, and the faults a cluster must survive, made with the kernel's own
// tools: kill -9 and restart on the same data directory, SIGSTOP/SIGCONT,
// partitions (iptables DROP rules inside the namespaces), a link taken down,
// delay and loss (tc netem). Then invariant checks: definitions exports
// identical on every node, no confirmed message lost, every Raft group with
// a leader within 10 s of healing.
//
// Use (the tests are behind the build tag faults; make test-faults runs them
// as root and installs iproute2 and iptables from Debian when missing):
//
//	c := faults.Start(t, 3, faults.Options{Bin: bin, NodeSettings: faults.ClusterSettings})
//	n1, n2 := c.Nodes[0], c.Nodes[1]
//	c.Partition(n1, n2)          // also Block (one way), Isolate, LinkDown, Netem
//	c.Heal()
//	c.Kill9(n1); c.Restart(n1)   // also Stop (SIGTERM), Pause, Resume
//	c.WaitSameDefinitions(10 * time.Second)
//	c.WaitLeaders(c.MetadataLeaderProbe) // every node names the same metadata leader
//	leader := c.WaitLeader()             // the leader every running node names (Status, AgreedLeader)
//	w := c.StartMetaWriter("x-", 5*time.Second, n1, n2) // metadata writes; MissingWrites(n, w.Acked())
//	c.CheckNoLoss(n1, "q", publisher.Confirmed())
//
// Layout of a run (id: 4 hex digits, unique among live runs): namespaces
// wfault-<id>-n1..., bridge wf<id>br with the host at 10.213.x.1/24, node i
// at 10.213.x.(10+i) on veth wf<id>h<i> (host end) / wf<id>n<i> (node end),
// every node listening on the standard ports (AMQP 5672, HTTP 15672, stream
// 5552, cluster 25672) of its own address. The run's directory holds each
// node's data directory and log. /run/warren-faults/<id> records the pid of
// the test process: Start removes the leftovers of runs whose process is
// gone (namespaces and the processes in them, bridge, veths, the host
// FORWARD rule added when br_netfilter is on), and the test's cleanup removes
// its own, on success and on failure (after printing the tail of every
// node's log). warren processes get SIGKILL if the test process dies.
//
// Concurrency: a Cluster's fault methods fail the test on error (t.Fatal),
// so they are called from the test's goroutine; a Publisher runs in its own
// goroutine and is safe to read from any. Sockets made by Node.Dial and
// DialAMQP belong to the node's namespace (the dialing thread switches in
// and back; a thread that cannot switch back is discarded).
//
// Kernels without sch_netem (some VM kernels) get the same Netem from
// iptables: a statistic match for loss and an NFQUEUE rule whose packets this
// process holds for the delay (delayer_linux.go).
package faults
