package raftgroup

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

func TestOneMemberAppliesAndRestartsWithItsLog(t *testing.T) {
	dir := t.TempDir()
	open := func(stores logstore.GroupStores, bootstrap bool) (*Group, *listFSM) {
		fsm := &listFSM{}
		g, err := Open(Config{ID: "g", Node: "n1", Network: transport.NewInmemHub().Network("n1"),
			Stores: stores, SnapshotDir: dir, FSM: fsm, Timing: fastTiming, Bootstrap: bootstrap})
		if err != nil {
			t.Fatal(err)
		}
		return g, fsm
	}
	stores, err := logstore.Open(context.Background(), t.TempDir(), logstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close()

	g, fsm := open(stores, true)
	if !g.Fresh() {
		t.Fatal("a group on an empty store is not Fresh")
	}
	if l := waitLeader(t, g); l != "n1" {
		t.Fatalf("leader %q, want n1", l)
	}
	for i := 1; i <= 3; i++ {
		res, index, err := g.Apply(ctxT(t), []byte("c"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if res != i || index == 0 {
			t.Fatalf("apply %d: response %v index %d", i, res, index)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fsm.list(); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("applied %v", got)
	}

	// Reopened without Bootstrap: the log elects the node again and
	// replays the commands into a new FSM.
	g, fsm = open(stores, false)
	defer g.Close()
	if g.Fresh() {
		t.Fatal("a group with a log is Fresh")
	}
	if err := g.Bootstrap(ctxT(t)); !errors.Is(err, ErrNotFresh) {
		t.Fatalf("bootstrap of a group with state: %v, want ErrNotFresh", err)
	}
	waitLeader(t, g)
	if err := g.Barrier(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got := fsm.list(); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Fatalf("after restart applied %v", got)
	}
}

func TestThreeMembersReplicateTransferAndRemove(t *testing.T) {
	c := newClusterTimed(t, 3, steadyTiming) // the leader must stay put until the transfer
	l := c.leader()
	if _, _, err := l.g.Apply(ctxT(t), []byte("a")); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.nodes {
		eventually.True(t, 5*time.Second, nd.name+" applies", func() bool { return slices.Equal(nd.fsm.list(), []string{"a"}) })
		if got := nd.g.Leader(); got != l.name {
			t.Fatalf("%s sees leader %q, want %q", nd.name, got, l.name)
		}
	}
	servers, err := l.g.Configuration(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{{"n1", true}, {"n2", true}, {"n3", true}}
	if !slices.Equal(servers, want) {
		t.Fatalf("configuration %v, want %v", servers, want)
	}

	follower := c.nodes[1]
	if follower == l {
		follower = c.nodes[2]
	}
	if _, _, err := follower.g.Apply(ctxT(t), []byte("x")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("apply on a follower: %v, want ErrNotLeader", err)
	}

	if err := l.g.TransferLeadership(ctxT(t), follower.name); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.nodes {
		eventually.True(t, 5*time.Second, nd.name+" sees the new leader", func() bool { return nd.g.Leader() == follower.name })
	}

	if err := follower.g.RemoveServer(ctxT(t), l.name); err != nil {
		t.Fatal(err)
	}
	servers, err = follower.g.Configuration(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 || slices.Contains(servers, Server{l.name, true}) {
		t.Fatalf("configuration after removing %s: %v", l.name, servers)
	}
	// The other two go on. (The removed node may or may not learn of its
	// removal, and may get an entry or two before the leader stops
	// replicating to it: raft's way.)
	if _, _, err := follower.g.Apply(ctxT(t), []byte("z")); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.nodes {
		if nd != l {
			eventually.True(t, 5*time.Second, nd.name+" applies z", func() bool { return slices.Contains(nd.fsm.list(), "z") })
		}
	}
}

// Concurrent Applies share log writes: raft takes what queued in its
// apply channel (BatchApplyCh) into one StoreLogs, one fdatasync.
func TestConcurrentAppliesShareLogWrites(t *testing.T) {
	var writes atomic.Int64
	fsm := &listFSM{}
	g, err := Open(Config{ID: "g", Node: "n1", Network: transport.NewInmemHub().Network("n1"),
		Stores: countingStores{logstore.NewInmem(), &writes}, SnapshotDir: t.TempDir(), FSM: fsm,
		Timing: fastTiming, Bootstrap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	waitLeader(t, g)
	before := writes.Load()
	const n = 512
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, _, err := g.Apply(ctxT(t), []byte(strconv.Itoa(i))); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := len(fsm.list()); got != n {
		t.Fatalf("applied %d commands, want %d", got, n)
	}
	w := writes.Load() - before
	t.Logf("%d applies in %d log writes", n, w)
	if w >= n/2 {
		t.Fatalf("%d concurrent applies took %d log writes: not batched", n, w)
	}
}

func TestWaitLeaderHonoursContextAndClose(t *testing.T) {
	g, err := Open(Config{ID: "g", Node: "n1", Network: transport.NewInmemHub().Network("n1"),
		Stores: logstore.NewInmem(), SnapshotDir: t.TempDir(), FSM: &listFSM{}, Timing: fastTiming})
	if err != nil {
		t.Fatal(err)
	}
	// Not bootstrapped, no peers: no leader ever.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := g.WaitLeader(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitLeader without a cluster: %v, want DeadlineExceeded", err)
	}
	if _, _, err := g.Apply(ctxT(t), []byte("x")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("apply without a leader: %v, want ErrNotLeader", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := g.WaitLeader(context.Background())
		done <- err
	}()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("WaitLeader across Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitLeader still waiting 5s after Close")
	}
}

func TestOpenRefusesAnIncompleteConfig(t *testing.T) {
	if _, err := Open(Config{ID: "g", Node: "n1"}); err == nil {
		t.Fatal("Open without a Network, stores or FSM succeeded")
	}
}

// The leader's node going down (the Network's per-node signal) makes the
// followers elect within about a lease, not a heartbeat timeout; also with
// a lease longer than the second at which the group checks whether a
// leader is known (the followers still name the dead one meanwhile).
func TestLeaderNodeDownElectsWithinALease(t *testing.T) {
	for _, lease := range []time.Duration{200 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(lease.String(), func(t *testing.T) { leaderNodeDown(t, lease) })
	}
}

func leaderNodeDown(t *testing.T, lease time.Duration) {
	// n1 forms the group fast; n2 and n3 would wait 20s or more for a
	// heartbeat before an election.
	fast := Timing{HeartbeatTimeout: lease, ElectionTimeout: lease, LeaderLeaseTimeout: lease, CommitTimeout: 5 * time.Millisecond}
	slow := fast
	slow.HeartbeatTimeout, slow.ElectionTimeout = 20*time.Second, 20*time.Second
	hub := transport.NewInmemHub()
	var groups []*Group
	for i := 1; i <= 3; i++ {
		name := "n" + strconv.Itoa(i)
		timing := slow
		if i == 1 {
			timing = fast
		}
		g, err := Open(Config{ID: "g", Node: name, Network: hub.Network(name), Stores: logstore.NewInmem(),
			SnapshotDir: t.TempDir(), FSM: &listFSM{}, Timing: timing, Bootstrap: i == 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		groups = append(groups, g)
	}
	waitLeader(t, groups[0])
	for _, name := range []string{"n2", "n3"} {
		if err := groups[0].AddVoter(ctxT(t), name); err != nil {
			t.Fatal(err)
		}
	}
	// Every member has the whole configuration (an entry is committed on
	// a majority, which need not include n2).
	if _, _, err := groups[0].Apply(ctxT(t), []byte("formed")); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups[1:] {
		eventually.True(t, 5*time.Second, g.Node()+" applies the entry after the configuration", func() bool {
			return g.AppliedIndex() >= groups[0].AppliedIndex()
		})
	}

	start := time.Now()
	_ = groups[0].Close()
	_ = hub.Network("n1").Close()
	eventually.True(t, 10*time.Second, "a new leader, well before the 20s heartbeat timeout", func() bool {
		l := groups[1].Leader()
		return l == "n2" || l == "n3"
	})
	t.Logf("new leader after %v", time.Since(start))
	for _, g := range groups[1:] {
		eventually.True(t, 5*time.Second, g.Node()+" restores its heartbeat timeout", func() bool {
			g.hurryMu.Lock()
			defer g.hurryMu.Unlock()
			return !g.hurried && g.r().ReloadableConfig().HeartbeatTimeout == slow.HeartbeatTimeout
		})
	}
}

// A whole group restarted (every member at once) elects within about a
// lease, not after its (here 20s) heartbeat timeout: no member has a
// leader to wait for.
func TestRestartedGroupElectsWithinALease(t *testing.T) {
	c := newCluster(t, 3)
	if _, _, err := c.leader().g.Apply(ctxT(t), []byte("formed")); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.nodes {
		eventually.True(t, 5*time.Second, nd.name+" has the configuration", func() bool {
			return len(nd.g.r().GetConfiguration().Configuration().Servers) == 3
		})
	}
	for _, nd := range c.nodes {
		must(t, nd.g.Close())
	}
	c.timing = Timing{HeartbeatTimeout: 20 * time.Second, ElectionTimeout: 20 * time.Second, LeaderLeaseTimeout: 200 * time.Millisecond}
	start := time.Now()
	for _, nd := range c.nodes {
		c.open(nd, false)
	}
	t.Logf("%s leads after %v", c.leader().name, time.Since(start))
}

// A group of this node alone elects itself at once, on bootstrap and on
// restart, not after its (here 20s) heartbeat timeout.
func TestOneMemberElectsItselfAtOnce(t *testing.T) {
	slow := Timing{HeartbeatTimeout: 20 * time.Second, ElectionTimeout: 20 * time.Second, LeaderLeaseTimeout: 100 * time.Millisecond}
	stores, dir := logstore.NewInmem(), t.TempDir()
	for _, bootstrap := range []bool{true, false} {
		hub := transport.NewInmemHub()
		start := time.Now()
		g, err := Open(Config{ID: "g", Node: "n1", Network: hub.Network("n1"), Stores: stores,
			SnapshotDir: dir, FSM: &listFSM{}, Timing: slow, Bootstrap: bootstrap})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := g.WaitLeader(ctx); err != nil {
			t.Fatalf("bootstrap %v: no leader within 5s (heartbeat timeout 20s): %v", bootstrap, err)
		}
		cancel()
		t.Logf("bootstrap %v: leader after %v", bootstrap, time.Since(start))
		eventually.True(t, 5*time.Second, "the heartbeat timeout is restored", func() bool {
			return g.r().ReloadableConfig().HeartbeatTimeout == slow.HeartbeatTimeout
		})
		must(t, g.Close())
	}
}

// A hurry that no observation follows (raft dropped it, or the leader
// never changed) still ends within about a second once a leader other
// than the one that went down is known: watchLeader looks every second
// while the group is hurried, and not at all otherwise.
func TestHurryEndsWithoutAnObservation(t *testing.T) {
	slow := Timing{HeartbeatTimeout: 20 * time.Second, ElectionTimeout: 20 * time.Second, LeaderLeaseTimeout: 100 * time.Millisecond}
	hub := transport.NewInmemHub()
	g, err := Open(Config{ID: "g", Node: "n1", Network: hub.Network("n1"), Stores: logstore.NewInmem(),
		SnapshotDir: t.TempDir(), FSM: &listFSM{}, Timing: slow, Bootstrap: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	waitLeader(t, g)
	hurried := func() bool {
		g.hurryMu.Lock()
		defer g.hurryMu.Unlock()
		return g.hurried
	}
	eventually.True(t, 5*time.Second, "the heartbeat timeout is restored after the election", func() bool { return !hurried() })
	for _, from := range []string{"n9", ""} { // a leader that went down; none known
		g.hurry("test", from)
		if !hurried() {
			t.Fatalf("hurry from %q: not hurried", from)
		}
		start := time.Now()
		eventually.True(t, 5*time.Second, "the hurry ends with n1 leading", func() bool { return !hurried() })
		t.Logf("hurry from %q ended after %v", from, time.Since(start))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
