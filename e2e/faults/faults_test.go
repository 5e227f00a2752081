//go:build faults && linux

package faults

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// bin is the warren binary every test runs: WARREN_FAULTS_BIN, or built once
// by TestMain.
var bin string

func TestMain(m *testing.M) {
	bin = os.Getenv("WARREN_FAULTS_BIN")
	if bin == "" && Missing() == "" {
		dir, err := os.MkdirTemp("", "warren-faults-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if bin, err = Build(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// start runs n independent nodes (no cluster settings): what the network
// faults and the definitions checker are tested on.
func start(t *testing.T, n int) *Cluster {
	t.Helper()
	return Start(t, n, Options{Bin: bin})
}

// startCluster runs n nodes as one cluster (ClusterSettings).
func startCluster(t *testing.T, n int) *Cluster {
	t.Helper()
	return Start(t, n, Options{Bin: bin, NodeSettings: ClusterSettings})
}

// reach reports whether a TCP connection from from (nil: the host) to to's
// AMQP port opens within timeout.
func reach(from, to *Node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := from.Dial(ctx, to.AMQPAddr())
	if err != nil {
		return err
	}
	return conn.Close()
}

func name(n *Node) string {
	if n == nil {
		return "host"
	}
	return n.Name
}

// reachability checks every path from the host and every node to every other
// node at once: those named in blocked ("n1>n2", "host>n1") must not open
// within a second, every other must.
func reachability(t *testing.T, c *Cluster, blocked ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, b := range blocked {
		want[b] = true
	}
	froms := append([]*Node{nil}, c.Nodes...)
	var mu sync.Mutex
	var wrong []string
	var wg sync.WaitGroup
	for _, from := range froms {
		for _, to := range c.Nodes {
			if from == to {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := name(from) + ">" + name(to)
				err := reach(from, to, time.Second)
				mu.Lock()
				defer mu.Unlock()
				if want[path] && err == nil {
					wrong = append(wrong, path+" opened, want blocked")
				}
				if !want[path] && err != nil {
					wrong = append(wrong, fmt.Sprintf("%s: %v, want open", path, err))
				}
			}()
		}
	}
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("reachability with %v blocked:\n%s", blocked, strings.Join(wrong, "\n"))
	}
}

// TestNetworkFaultsCutTCPAndHealRestoresIt: each network fault blocks
// exactly the paths it names (TCP connects to the AMQP port time out) and
// Heal opens them all again.
func TestNetworkFaultsCutTCPAndHealRestoresIt(t *testing.T) {
	c := start(t, 3)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	reachability(t, c)
	for _, tt := range []struct {
		fault   string
		apply   func()
		blocked []string
	}{
		{"partition n1 n2", func() { c.Partition(n1, n2) }, []string{"n1>n2", "n2>n1"}},
		// One way: n2 drops what n1 sends, so neither can open a connection
		// to the other (a handshake needs both ways), host and n3 are fine.
		{"block n1 to n2", func() { c.Block(n1, n2) }, []string{"n1>n2", "n2>n1"}},
		{"isolate n3", func() { c.Isolate(n3) }, []string{"n1>n3", "n2>n3", "n3>n1", "n3>n2"}},
		{"link down n1", func() { c.LinkDown(n1) }, []string{"host>n1", "n2>n1", "n3>n1", "n1>n2", "n1>n3"}},
	} {
		t.Run(tt.fault, func(t *testing.T) {
			tt.apply()
			reachability(t, c, tt.blocked...)
			c.Heal()
			eventually.Succeeds(t, 10*time.Second, "every path open after Heal", func() error {
				for _, from := range append([]*Node{nil}, c.Nodes...) {
					for _, to := range c.Nodes {
						if from != to {
							if err := reach(from, to, time.Second); err != nil {
								return fmt.Errorf("%s>%s: %w", name(from), to.Name, err)
							}
						}
					}
				}
				return nil
			})
		})
	}
}

// TestPartitionStallsAnOpenConnection: a partition also stops traffic on a
// connection opened before it (an AMQP connection from n1 to n2 stops
// getting answers), and the connection works again after Heal if it
// outlived the partition.
func TestPartitionStallsAnOpenConnection(t *testing.T) {
	c := start(t, 3)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	conn, err := c.DialAMQP(n1, n2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c.Partition(n1, n2)
	opened := make(chan error, 1)
	go func() {
		ch, err := conn.Channel()
		if err == nil {
			ch.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		t.Fatalf("channel.open across a partition answered (%v)", err)
	case <-time.After(2 * time.Second):
	}
	c.Heal()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("channel.open after Heal: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("channel.open not answered within 15 s of Heal")
	}
}

// connectTime is the shortest of five TCP connects from the host to n's
// AMQP port (a connect takes one round trip).
func connectTime(t *testing.T, from, to *Node) time.Duration {
	t.Helper()
	best := time.Hour
	for range 5 {
		begin := time.Now()
		if err := reach(from, to, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(begin))
	}
	return best
}

// TestNetemDelayAndLoss: a delay shows in every round trip to the node (from
// the host and from another node) and goes with Heal; loss makes the node
// slow, not broken: every message of a confirming publisher is confirmed
// while the kernel drops packets.
func TestNetemDelayAndLoss(t *testing.T) {
	c := start(t, 2)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	const delay = 150 * time.Millisecond
	if rtt := connectTime(t, nil, n1); rtt >= delay {
		t.Fatalf("connect to n1 takes %v before any delay; the test needs it under %v", rtt, delay)
	}
	c.Netem(n1, delay, 0)
	for _, from := range []*Node{nil, n2} {
		if rtt := connectTime(t, from, n1); rtt < delay {
			t.Errorf("connect %s>n1 took %v with a delay of %v on n1", name(from), rtt, delay)
		} else {
			t.Logf("connect %s>n1 with %v delay: %v", name(from), delay, rtt)
		}
	}
	c.Heal()
	if rtt := connectTime(t, nil, n1); rtt >= delay {
		t.Errorf("connect to n1 takes %v after Heal, want under %v", rtt, delay)
	}

	declare(t, n1, "lossy")
	c.Netem(n1, 0, 20)
	p := StartPublisher(PublisherConfig{
		Dial:       func() (*amqp.Connection, error) { return DialAMQP(nil, n1.AMQPURL(), 30*time.Second) },
		RoutingKey: "lossy",
		Limit:      300,
	})
	select {
	case <-p.Done():
	case <-time.After(90 * time.Second):
		t.Fatalf("300 messages not published through 20%% loss in 90 s: %v", p.Stop())
	}
	st := p.Stats()
	t.Logf("through 20%% loss: %v, %d packets dropped", st, c.NetemDropped(n1))
	if st.Confirmed != 300 || st.Redials != 0 {
		t.Errorf("through 20%% loss: %v; want all 300 confirmed on one connection", st)
	}
	if d := c.NetemDropped(n1); d == 0 {
		t.Error("Netem loss dropped no packet")
	}
	c.Heal()
	c.CheckNoLoss(n1, "lossy", p.Confirmed())
}

// declare declares a durable queue on n from the host.
func declare(t *testing.T, n *Node, queue string) {
	t.Helper()
	conn, err := DialAMQP(nil, n.AMQPURL(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
}

// TestPauseMakesANodeUnresponsiveAndResumeBringsItBack: a SIGSTOPped node
// still completes TCP handshakes (the kernel does) but no AMQP handshake;
// after SIGCONT it answers again, its queue and messages intact.
func TestPauseMakesANodeUnresponsiveAndResumeBringsItBack(t *testing.T) {
	c := startCluster(t, 1)
	n1 := c.Nodes[0]
	declare(t, n1, "paused")
	p := StartPublisher(PublisherConfig{
		Dial:       func() (*amqp.Connection, error) { return DialAMQP(nil, n1.AMQPURL(), 10*time.Second) },
		RoutingKey: "paused",
		Limit:      100,
	})
	<-p.Done()
	if st := p.Stats(); st.Confirmed != 100 {
		t.Fatalf("before the pause: %v", st)
	}

	c.Pause(n1)
	if err := reach(nil, n1, 2*time.Second); err != nil {
		t.Errorf("TCP connect to a paused node: %v; the kernel should still accept", err)
	}
	if conn, err := DialAMQP(nil, n1.AMQPURL(), 2*time.Second); err == nil {
		conn.Close()
		t.Fatal("AMQP handshake with a paused node succeeded")
	} else {
		t.Logf("AMQP handshake with the paused node: %v", err)
	}

	c.Resume(n1)
	var conn *amqp.Connection
	eventually.Succeeds(t, 10*time.Second, "AMQP connection after Resume", func() (err error) {
		conn, err = DialAMQP(nil, n1.AMQPURL(), 2*time.Second)
		return err
	})
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclarePassive("paused", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("queue after Resume: %v", err)
	}
	if q.Messages != 100 {
		t.Errorf("queue after Resume has %d messages, want 100", q.Messages)
	}
}

// TestKill9KeepsEveryConfirmedMessage: kill -9 in the middle of a confirming
// publisher's run, restart on the same data directory, and every confirmed
// persistent message on the durable queue is still there; the same after a
// graceful stop. (One node started with ClusterSettings: a one-member
// cluster.)
func TestKill9KeepsEveryConfirmedMessage(t *testing.T) {
	c := startCluster(t, 1)
	n1 := c.Nodes[0]
	declare(t, n1, "durable")
	p := StartPublisher(PublisherConfig{
		Dial:       func() (*amqp.Connection, error) { return DialAMQP(nil, n1.AMQPURL(), 2*time.Second) },
		RoutingKey: "durable",
		Window:     256,
	})
	eventually.True(t, 30*time.Second, "2,000 messages confirmed", func() bool { return p.Stats().Confirmed >= 2000 })
	pid := n1.Pid()
	c.Kill9(n1)
	st := p.Stop()
	t.Logf("publisher at kill -9 of pid %d: %v", pid, st)
	if st.Published == st.Confirmed {
		t.Log("no message was in flight at the kill")
	}
	c.Restart(n1)
	rep := c.CheckNoLoss(n1, "durable", p.Confirmed())
	t.Logf("after restart: %v", rep)
	if rep.Confirmed < 2000 {
		t.Errorf("only %d confirmed messages to check", rep.Confirmed)
	}

	// A graceful stop (SIGTERM) and restart keeps them too.
	p = StartPublisher(PublisherConfig{
		Dial:       func() (*amqp.Connection, error) { return DialAMQP(nil, n1.AMQPURL(), 2*time.Second) },
		RoutingKey: "durable",
		Prefix:     "after-",
		Limit:      500,
	})
	<-p.Done()
	c.Stop(n1)
	if c.Running(n1) {
		t.Fatal("n1 runs after Stop")
	}
	c.Restart(n1)
	if rep := c.CheckNoLoss(n1, "durable", p.Confirmed()); rep.Confirmed != 500 {
		t.Errorf("after SIGTERM and restart: %v; want 500 confirmed", rep)
	}
}

// TestDefinitionsCompareAcrossNodes: the checker tells independent nodes
// apart (each salted its own guest password), finds nothing once one node's
// export is imported into the others, then finds a queue that exists on one
// node only, naming the nodes without it and the queue.
func TestDefinitionsCompareAcrossNodes(t *testing.T) {
	c := start(t, 3)
	ctx := context.Background()
	err := c.SameDefinitions(ctx)
	if err == nil || !strings.Contains(err.Error(), "n2 users: + ") || !strings.Contains(err.Error(), "n3 users: - ") {
		t.Fatalf("three independent nodes: %v; want their guest users reported", err)
	}
	_, docs, err := c.DefinitionsOf(ctx, c.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes[1:] {
		req, err := http.NewRequest(http.MethodPost, n.HTTPURL()+"/api/definitions", bytes.NewReader(docs[0]))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("guest", "guest")
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("import into %s: %s", n.Name, resp.Status)
		}
	}
	c.WaitSameDefinitions(5 * time.Second)

	declare(t, c.Nodes[0], "only-on-n1")
	err = c.SameDefinitions(ctx)
	if err == nil || !strings.Contains(err.Error(), "n2 queues: - ") || !strings.Contains(err.Error(), "n3 queues: - ") ||
		!strings.Contains(err.Error(), "only-on-n1") || strings.Contains(err.Error(), "users") {
		t.Fatalf("a queue on n1 only: %v; want n2 and n3 reported without it, nothing else", err)
	}
	t.Logf("the checker's report: %v", err)
}

// TestStaleRunIsRemoved: leftovers of a run whose process died (a namespace,
// a veth, its state file) are removed by the next Start, and a live run's
// are not.
func TestStaleRunIsRemoved(t *testing.T) {
	Require(t)
	const id = "fa17"
	ns := nsPrefix + id + "-n1"
	if err := writeState(id, "/nonexistent"); err != nil {
		t.Fatal(err)
	}
	// A pid that cannot be running.
	if err := os.WriteFile(stateDir+"/"+id, []byte("2147483646\n/nonexistent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run("ip", "netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	if _, err := run("ip", "link", "add", "wf"+id+"h1", "type", "veth", "peer", "name", "wf"+id+"n1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = teardown(id) })
	c := start(t, 1)
	if _, err := os.Stat("/run/netns/" + ns); err == nil {
		t.Errorf("stale namespace %s still there", ns)
	}
	if linkExists("wf" + id + "h1") {
		t.Errorf("stale veth wf%sh1 still there", id)
	}
	if _, err := os.Stat(stateDir + "/" + id); err == nil {
		t.Errorf("stale state file still there")
	}
	if !runAlive(c.id) {
		t.Errorf("the live run %s is not recorded as alive", c.id)
	}
}

// TestPublisherMovesOnWhenItsNodeDies: a publisher dialing with DialAny
// keeps publishing on the next node when its node is killed, and every
// message it had confirmed is on one node or the other afterwards (on
// independent nodes each keeps what it confirmed).
func TestPublisherMovesOnWhenItsNodeDies(t *testing.T) {
	c := start(t, 2)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	declare(t, n1, "q")
	declare(t, n2, "q")
	p := StartPublisher(PublisherConfig{Dial: c.DialAny(nil, 2*time.Second), RoutingKey: "q"})
	eventually.True(t, 30*time.Second, "500 messages confirmed", func() bool { return p.Stats().Confirmed >= 500 })
	c.Kill9(n1)
	before := p.Stats().Confirmed
	eventually.True(t, 30*time.Second, "500 more confirmed after n1 died", func() bool { return p.Stats().Confirmed >= before+500 })
	st := p.Stop()
	t.Logf("publisher: %v", st)
	if st.Redials == 0 {
		t.Error("the publisher never had to redial")
	}
	c.Restart(n1)
	confirmed := p.Confirmed()
	lostOn := map[*Node]map[string]bool{}
	for _, n := range c.Nodes {
		conn, err := DialAMQP(nil, n.AMQPURL(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Drain(context.Background(), conn, "q", confirmed, 2*time.Second)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v", n.Name, rep)
		lostOn[n] = map[string]bool{}
		for _, id := range rep.Lost {
			lostOn[n][id] = true
		}
	}
	var lost []string
	for id := range lostOn[n1] {
		if lostOn[n2][id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d confirmed messages on neither node (e.g. %s)", len(lost), lost[0])
	}
}
