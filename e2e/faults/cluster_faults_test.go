//go:build faults && linux

package faults

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// The cluster scenarios: three nodes forming one cluster (ClusterSettings),
// a fault on the metadata leader (or a node) while metadata writes and a
// confirming publisher run, then the invariants: an agreed metadata leader
// on every node within 10 s of healing (WaitLeaders with
// MetadataLeaderProbe), the same definitions on every node, every
// acknowledged metadata write on every node, and no confirmed message lost
// on a durable queue of a node that stayed up (or was restarted).

// without returns nodes less drop.
func without(nodes []*Node, drop ...*Node) []*Node {
	var out []*Node
	for _, n := range nodes {
		if !slices.Contains(drop, n) {
			out = append(out, n)
		}
	}
	return out
}

// load is what runs during a scenario: metadata writes to writers (in turn)
// and a confirming publisher to a durable queue declared on pub (where the
// queue lives: it is published to and drained there).
type load struct {
	w     *MetaWriter
	p     *Publisher
	pub   *Node
	queue string
	// more publishers to the same queue (through other nodes), checked
	// with p
	more []*Publisher
}

func startLoad(t *testing.T, c *Cluster, name string, pub *Node, writers ...*Node) *load {
	t.Helper()
	declare(t, pub, name)
	l := &load{pub: pub, queue: name}
	l.w = c.StartMetaWriter(name+"-", 5*time.Second, writers...)
	l.p = StartPublisher(PublisherConfig{
		Dial:       func() (*amqp.Connection, error) { return DialAMQP(nil, pub.AMQPURL(), 2*time.Second) },
		RoutingKey: name,
	})
	eventually.True(t, 30*time.Second, "metadata writes and confirms under way", func() bool {
		return l.w.Stats().Acked >= 10 && l.p.Stats().Confirmed >= 100
	})
	return l
}

// moreWrites waits until n more metadata writes are acknowledged.
func (l *load) moreWrites(t *testing.T, n int, within time.Duration, what string) {
	t.Helper()
	before := l.w.Stats().Acked
	eventually.True(t, within, what, func() bool { return l.w.Stats().Acked >= before+n })
}

// check stops the load and checks the invariants: a leader every running
// node agrees on (within 10 s), the same definitions everywhere, every
// acknowledged write on every running node, every confirmed message in
// the queue.
func (l *load) check(t *testing.T, c *Cluster) {
	t.Helper()
	c.WaitLeaders(c.MetadataLeaderProbe)
	ws := l.w.Stop()
	ps := l.p.Stop()
	t.Logf("metadata writes: %v", ws)
	t.Logf("publisher: %v", ps)
	confirmed := l.p.Confirmed()
	for i, p := range l.more {
		t.Logf("publisher %d: %v", i+2, p.Stop())
		for id := range p.Confirmed() {
			confirmed[id] = true
		}
	}
	c.WaitSameDefinitions(10 * time.Second)
	for _, n := range c.Nodes {
		if !n.running() {
			continue
		}
		missing, err := c.MissingWrites(n, l.w.Acked())
		if err != nil {
			t.Fatal(err)
		}
		if len(missing) > 0 {
			t.Errorf("%s lacks %d acknowledged metadata writes, e.g. %+v", n.Name, len(missing), missing[0])
		}
	}
	c.CheckNoLoss(l.pub, l.queue, confirmed)
}

// TestClusterKill9OfTheLeader: kill -9 of the metadata leader while another
// node takes metadata writes and publishes: the other two elect a leader
// within 10 s and go on acknowledging writes; the killed node restarts on
// its data and catches up (same definitions, every acknowledged write).
func TestClusterKill9OfTheLeader(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.WaitLeader()
	rest := without(c.Nodes, leader)
	l := startLoad(t, c, "kill9", rest[0], rest...)

	c.Kill9(leader)
	killed := time.Now()
	next := c.WaitLeader(rest...)
	t.Logf("kill -9 of %s: %s leads after %v", leader.Name, next.Name, time.Since(killed).Round(time.Millisecond))
	l.moreWrites(t, 10, 15*time.Second, "metadata writes acknowledged without the killed leader")

	c.Restart(leader)
	l.moreWrites(t, 10, 15*time.Second, "metadata writes acknowledged after the restart")
	l.check(t, c)
}

// TestClusterPartitionedLeader: the metadata leader cut off from the other
// two (clients still reach it). The majority elects a leader within 10 s
// and acknowledges writes; the old leader steps down and a write or a
// declare sent to it is not acknowledged; after Heal there is one history
// (same definitions, every acknowledged write, the minority's write applied
// everywhere or nowhere).
func TestClusterPartitionedLeader(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.WaitLeader()
	rest := without(c.Nodes, leader)
	l := startLoad(t, c, "partition", rest[0], rest...)

	c.Isolate(leader)
	cut := time.Now()
	next := c.WaitLeader(rest...)
	t.Logf("%s isolated: %s leads the majority after %v", leader.Name, next.Name, time.Since(cut).Round(time.Millisecond))
	l.moreWrites(t, 10, 15*time.Second, "the majority acknowledges metadata writes")
	eventually.Succeeds(t, LeaderWithin, "the isolated leader steps down", func() error {
		st, err := c.Status(leader)
		if err != nil {
			return err
		}
		if st.MetadataLeader == leader.NodeName() {
			return errorf("%s still says it leads", leader.Name)
		}
		return nil
	})

	// The minority's writes are not acknowledged: an error, or no answer.
	for _, kind := range metaKinds {
		mw := MetaWrite{Kind: kind, Name: "minority-" + kind}
		err := c.PutMeta(context.Background(), leader, mw, 3*time.Second)
		if err == nil {
			t.Errorf("the isolated node acknowledged a write of %s %s", kind, mw.Name)
		} else {
			t.Logf("a write of %s on the isolated node: %v", kind, err)
		}
	}
	declared := startDeclare(t, leader, "minority-amqp")
	select {
	case err := <-declared:
		if err == nil {
			t.Error("the isolated node declared a queue over AMQP")
		}
		t.Logf("queue.declare on the isolated node: %v", err)
		declared = nil
	case <-time.After(3 * time.Second):
		t.Log("queue.declare on the isolated node: no answer within 3 s (it waits for a leader)")
	}

	c.Heal()
	healed := time.Now()
	c.WaitLeaders(c.MetadataLeaderProbe)
	t.Logf("after Heal, every node agrees on a leader within %v", time.Since(healed).Round(time.Millisecond))
	if declared != nil {
		// The declare that waited completes once the node has a leader again
		// (then the queue is on every node: the definitions check below).
		select {
		case err := <-declared:
			t.Logf("the waiting queue.declare after Heal: %v", err)
		case <-time.After(LeaderWithin):
			t.Errorf("the queue.declare that waited on the isolated node got no answer within %v of Heal", LeaderWithin)
		}
	}
	l.moreWrites(t, 10, 15*time.Second, "metadata writes acknowledged after Heal")
	l.check(t, c)
}

// TestClusterPausedLeader: SIGSTOP of the metadata leader for longer than
// the election timeout: the others elect a leader and go on; after SIGCONT
// the old leader steps down and follows (every node names the same
// leader), and a write sent to it is acknowledged and seen everywhere.
func TestClusterPausedLeader(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.WaitLeader()
	rest := without(c.Nodes, leader)
	l := startLoad(t, c, "pause", rest[0], rest...)

	c.Pause(leader)
	paused := time.Now()
	// A write sent to a follower now is forwarded to the paused leader; it
	// must not wait for the old leader to come back once there is a new one.
	stuck := make(chan error, 1)
	go func() {
		stuck <- c.PutMeta(context.Background(), rest[1], MetaWrite{Kind: "users", Name: "during-pause"}, 30*time.Second)
	}()
	next := c.WaitLeader(rest...)
	elected := time.Since(paused)
	l.moreWrites(t, 10, 15*time.Second, "metadata writes acknowledged while the leader is paused")
	select {
	case err := <-stuck:
		t.Logf("a write sent to %s right after the pause: %v after %v", rest[1].Name, err, time.Since(paused).Round(time.Millisecond))
		if err != nil {
			t.Error(err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("a write sent to %s right after the leader paused is not acknowledged %v after %s was elected (it waits for the paused leader)",
			rest[1].Name, time.Since(paused)-elected, next.Name)
	}
	c.Resume(leader)
	resumed := time.Now()
	c.WaitLeaders(c.MetadataLeaderProbe)
	now, err := c.AgreedLeader()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s paused: %s led; %v after SIGCONT every node names %s", leader.Name, next.Name, time.Since(resumed).Round(time.Millisecond), now.Name)

	mw := MetaWrite{Kind: "users", Name: "after-resume"}
	eventually.Succeeds(t, 10*time.Second, "a write on the resumed node", func() error {
		return c.PutMeta(context.Background(), leader, mw, 3*time.Second)
	})
	l.w.Record(mw) // checked on every node with the others
	l.check(t, c)
}

// TestClusterNetemOnTheLeader: 100 ms delay and 10% loss on every packet
// the metadata leader sends: writes sent to every node still commit, the
// cluster keeps a leader; after Heal the invariants hold.
func TestClusterNetemOnTheLeader(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.WaitLeader()
	rest := without(c.Nodes, leader)
	l := startLoad(t, c, "netem", rest[0], c.Nodes...)

	c.Netem(leader, 100*time.Millisecond, 10)
	l.moreWrites(t, 50, 60*time.Second, "50 metadata writes acknowledged under delay and loss")
	c.WaitLeaders(c.MetadataLeaderProbe)
	dropped := c.NetemDropped(leader)
	t.Logf("under netem: %v; %d packets dropped", l.w.Stats(), dropped)
	if dropped == 0 {
		t.Error("the loss dropped no packet")
	}
	c.Heal()
	l.check(t, c)
}

// TestClusterWipedNodeRejoinsAfterForget: a node whose data directory is
// gone (a replaced disk) is refused under its old name (it keeps waiting,
// saying why) until forget-node on another node; then it joins as a new
// member and gets every definition.
func TestClusterWipedNodeRejoinsAfterForget(t *testing.T) {
	c := startCluster(t, 3)
	n1, n3 := c.Nodes[0], c.Nodes[2]
	c.WaitLeader()
	l := startLoad(t, c, "wipe", n1, c.Nodes[:2]...)

	c.Stop(n3)
	c.Wipe(n3)
	c.Spawn(n3)
	eventually.True(t, 20*time.Second, "the wiped node is refused under its old name", func() bool {
		return c.LogContains(n3, "cluster: refused")
	})
	if c.Started(n3) {
		t.Fatal("the wiped node started without forget-node")
	}
	st, err := c.Status(n1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before forget-node, n1 sees: %+v", st.Nodes)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, body, err := c.HTTP(ctx, n1, http.MethodDelete, "/api/cluster/nodes/"+n3.NodeName(), nil)
	if err != nil || code != http.StatusNoContent {
		t.Fatalf("forget-node %s on n1: %d %s %v", n3.NodeName(), code, body, err)
	}
	c.WaitStarted(n3, 30*time.Second)
	eventually.Succeeds(t, 10*time.Second, "three running voters", func() error {
		st, err := c.Status(n1)
		if err != nil {
			return err
		}
		voters := 0
		for _, m := range st.Nodes {
			if m.Voter && m.Running {
				voters++
			}
		}
		if voters != 3 {
			return errorf("n1 sees %+v", st.Nodes)
		}
		return nil
	})
	l.moreWrites(t, 10, 15*time.Second, "metadata writes acknowledged after the rejoin")
	l.check(t, c)
}

// TestClusterRollingRestart: every node in turn stopped with SIGTERM (it
// drains: the leadership moves away first) and restarted, while metadata
// writes go to every node: the metadata group is never without a leader
// for more than 3 s, and no acknowledged write or confirmed message is
// lost.
func TestClusterRollingRestart(t *testing.T) {
	c := startCluster(t, 3)
	c.WaitLeader()
	l := startLoad(t, c, "rolling", c.Nodes[0], c.Nodes...)
	// A second publisher to the same queue on n1 through any node (its
	// publishes to n2 and n3 are forwarded to n1), moving on when its node
	// stops.
	l.more = append(l.more, StartPublisher(PublisherConfig{Dial: c.DialAny(nil, 2*time.Second), RoutingKey: "rolling", Prefix: "any-"}))
	gap := watchLeader(c)
	for _, n := range c.Nodes {
		before := l.w.Stats().Acked
		leader, err := c.AgreedLeader()
		if err != nil {
			t.Fatal(err)
		}
		c.Stop(n)
		if n == leader && !c.LogContains(n, "cluster: metadata leadership moved") {
			t.Errorf("%s led and stopped (SIGTERM) without moving the leadership first", n.Name)
		}
		c.Restart(n)
		c.WaitLeaders(c.MetadataLeaderProbe)
		eventually.True(t, 15*time.Second, "metadata writes acknowledged after restarting "+n.Name, func() bool {
			return l.w.Stats().Acked > before+5
		})
	}
	longest := gap()
	t.Logf("rolling restart: longest time without a metadata leader %v; writes: %v", longest.Round(time.Millisecond), l.w.Stats())
	if longest > 3*time.Second {
		t.Errorf("the metadata group was without a leader for %v during a rolling restart", longest)
	}
	if st := l.more[0].Stats(); st.Confirmed == 0 {
		t.Errorf("the publisher through any node had nothing confirmed: %v", st)
	}
	l.check(t, c)
}

// watchLeader polls every node's status every 100 ms until the returned
// function is called, which returns the longest time no node that answered
// named a leader that itself says it leads.
func watchLeader(c *Cluster) func() time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	var longest time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := time.Now()
		for ctx.Err() == nil {
			if hasLeader(c) {
				last = time.Now()
			}
			longest = max(longest, time.Since(last))
			sleep(ctx, 100*time.Millisecond)
		}
	}()
	return func() time.Duration {
		cancel()
		wg.Wait()
		return longest
	}
}

func hasLeader(c *Cluster) bool {
	for _, n := range c.Nodes {
		st, err := c.Status(n)
		if err != nil || st.MetadataLeader == "" {
			continue
		}
		if l := c.byNodeName(st.MetadataLeader); l != nil {
			if ls, err := c.Status(l); err == nil && ls.MetadataLeader == st.MetadataLeader {
				return true
			}
		}
	}
	return false
}

// startDeclare declares a durable queue on n over AMQP in the background:
// the declare's answer (nil: declare-ok) arrives on the channel returned;
// the connection closes after it.
func startDeclare(t *testing.T, n *Node, queue string) <-chan error {
	t.Helper()
	conn, err := DialAMQP(nil, n.AMQPURL(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		defer conn.Close()
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
		}
		errc <- err
	}()
	return errc
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
