package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

func TestRaftWriteOnFollowerIsReadEverywhere(t *testing.T) {
	c := newRaftCluster(t, 3, fastTiming)
	f := c.follower()
	must(t, f.r.PutVhost(ctxT(t), Vhost{Name: "v1", Description: "from a follower"}))
	// Read-your-writes: the writing node has applied it, and its
	// subscribers have seen it, when the call returns.
	if _, ok := f.r.Vhost("v1"); !ok {
		t.Fatalf("%s cannot read the vhost it just wrote", f.name)
	}
	if got := f.ev.count(VhostPut); got != 1 {
		t.Fatalf("%s's subscriber saw %d VhostPut events when the write returned, want 1", f.name, got)
	}
	for _, nd := range c.nodes {
		eventually.True(t, 5*time.Second, nd.name+" reads v1", func() bool { _, ok := nd.r.Vhost("v1"); return ok })
	}
	fill(t, f.r)
	c.converged(true)
	if got := dumpOf(c.leader().r); len(got.Queues) != 2 || len(got.Bindings) != 2 || len(got.Nodes) != 2 {
		t.Fatalf("leader's state after fill on a follower: %+v", got)
	}
}

func TestRaftSubscribersSeeOneOrderEverywhere(t *testing.T) {
	c := newRaftCluster(t, 3, fastTiming)
	must(t, c.leader().r.PutVhost(ctxT(t), Vhost{Name: "/"}))
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		for w := range 4 {
			wg.Go(func() {
				for i := range 10 {
					name := fmt.Sprintf("%s-%d-%d", nd.name, w, i)
					if err := nd.r.PutQueue(ctxT(t), Queue{Vhost: "/", Name: name, Durable: true}); err != nil {
						t.Errorf("put %s: %v", name, err)
					}
					if i%3 == 0 {
						if err := nd.r.DeleteQueue(ctxT(t), "/", name); err != nil {
							t.Errorf("delete %s: %v", name, err)
						}
					}
				}
			})
		}
	}
	wg.Wait()
	c.converged(true)
	if got, want := c.nodes[0].ev.count(QueuePut), 3*4*10; got != want {
		t.Fatalf("%d QueuePut events, want %d", got, want)
	}
	if got, want := len(c.nodes[0].r.Queues("/")), 3*4*6; got != want {
		t.Fatalf("%d queues, want %d", got, want)
	}
}

func TestRaftLeaderLossElectsAnotherAndTheOldOneCatchesUp(t *testing.T) {
	c := newRaftCluster(t, 3, fastTiming)
	old := c.leader()
	must(t, old.r.PutVhost(ctxT(t), Vhost{Name: "before"}))
	c.converged(true)

	c.stop(old)
	start := time.Now()
	var next *raftNode
	eventually.True(t, 5*time.Second, "a new leader", func() bool {
		for _, nd := range c.nodes {
			if nd.r != nil && nd.r.Group().IsLeader() {
				next = nd
				return true
			}
		}
		return false
	})
	t.Logf("new leader %s after %v", next.name, time.Since(start))
	// Writes go on from either survivor.
	for _, nd := range c.nodes {
		if nd.r != nil {
			must(t, nd.r.PutVhost(ctxT(t), Vhost{Name: "after-" + nd.name}))
		}
	}

	c.start(old, false)
	must(t, old.r.Sync(ctxT(t)))
	if got := len(old.r.Vhosts()); got != 3 {
		t.Fatalf("restarted %s has %d vhosts after Sync, want 3: %v", old.name, got, old.r.Vhosts())
	}
	must(t, old.r.PutVhost(ctxT(t), Vhost{Name: "from-the-old-leader"}))
	c.converged(false)
}

func TestRaftNodeBehindCatchesUpBySnapshotAndResets(t *testing.T) {
	timing := fastTiming
	timing.TrailingLogs = 8
	timing.SnapshotThreshold = 1 << 20 // only the snapshot the test takes
	c := newRaftCluster(t, 3, timing)
	must(t, c.leader().r.PutVhost(ctxT(t), Vhost{Name: "/"}))
	c.converged(true)

	behind := c.follower()
	c.stop(behind)
	l := c.leader()
	for i := range 50 {
		must(t, l.r.PutQueue(ctxT(t), Queue{Vhost: "/", Name: "q" + strconv.Itoa(i), Durable: true}))
	}
	// The leader's log now starts after what the stopped node has.
	must(t, l.r.Group().Snapshot(ctxT(t)))

	c.start(behind, false)
	eventually.True(t, 10*time.Second, behind.name+"'s subscriber gets a Reset", func() bool { return behind.ev.count(Reset) == 1 })
	must(t, behind.r.Sync(ctxT(t)))
	if got := len(behind.r.Queues("/")); got != 50 {
		t.Fatalf("%s has %d queues after the snapshot, want 50", behind.name, got)
	}
	// Events resume after the reset, in order with the others.
	must(t, behind.r.PutQueue(ctxT(t), Queue{Vhost: "/", Name: "after", Durable: true}))
	c.converged(false)
	if got := behind.ev.get(); got[len(got)-1] != fmt.Sprintf("%d / after", QueuePut) {
		t.Fatalf("%s's last event %q", behind.name, got[len(got)-1])
	}
}

func TestRaftExportIsIdenticalAfterConcurrentWrites(t *testing.T) {
	c := newRaftCluster(t, 3, fastTiming)
	ctx := ctxT(t)
	must(t, c.leader().r.PutVhost(ctx, Vhost{Name: "/"}))
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		wg.Go(func() {
			for i := range 8 {
				id := nd.name + "-" + strconv.Itoa(i)
				for _, err := range []error{
					nd.r.PutUser(ctx, User{Name: "u" + id, PasswordHash: "h", Tags: []string{"management"}}),
					nd.r.PutPermission(ctx, Permission{User: "u" + id, Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}),
					nd.r.PutExchange(ctx, Exchange{Vhost: "/", Name: "x" + id, Type: "topic", Durable: true}),
					nd.r.PutQueue(ctx, Queue{Vhost: "/", Name: "q" + id, Durable: true, Arguments: map[string]any{"x-max-length": int64(i)}}),
					nd.r.PutBinding(ctx, Binding{Vhost: "/", Source: "x" + id, Destination: "q" + id, DestinationType: "queue", RoutingKey: "#"}),
					nd.r.PutPolicy(ctx, Policy{Vhost: "/", Name: "p" + id, Pattern: "^q", Priority: i, Definition: map[string]any{"max-length": int64(i)}}),
				} {
					if err != nil {
						t.Errorf("%s: %v", id, err)
					}
				}
			}
		})
	}
	wg.Wait()
	var want []byte
	for _, nd := range c.nodes {
		must(t, nd.r.Sync(ctx))
		got, err := json.Marshal(Export(nd.r, ""))
		must(t, err)
		if want == nil {
			want = got
		} else if string(got) != string(want) {
			t.Fatalf("%s exports\n%s\nwant\n%s", nd.name, got, want)
		}
	}
	var d Definitions
	must(t, json.Unmarshal(want, &d))
	if len(d.Queues) != 24 || len(d.Bindings) != 24 || len(d.Users) != 24 {
		t.Fatalf("export has %d queues, %d bindings, %d users, want 24 each", len(d.Queues), len(d.Bindings), len(d.Users))
	}
}

func TestRaftRefusedWriteGivesTheSameErrorOnLeaderAndFollower(t *testing.T) {
	c := newRaftCluster(t, 3, fastTiming)
	l, f := c.leader(), c.follower()
	must(t, l.r.PutVhost(ctxT(t), Vhost{Name: "/"}))
	_, err := l.r.DeclareQueue(ctxT(t), Queue{Vhost: "/", Name: "q", Durable: true})
	must(t, err)

	tests := []struct {
		name  string
		write func(s Store) error
		is    error
		typed bool // an *Error
	}{
		{"queue in a missing vhost", func(s Store) error { return s.PutQueue(ctxT(t), Queue{Vhost: "nope", Name: "q"}) }, ErrNotFound, false},
		{"vhost without a name", func(s Store) error { return s.PutVhost(ctxT(t), Vhost{}) }, ErrInvalid, false},
		{"delete a missing user", func(s Store) error { return s.DeleteUser(ctxT(t), "nobody") }, ErrNotFound, false},
		{"inequivalent redeclare", func(s Store) error {
			_, err := s.DeclareQueue(ctxT(t), Queue{Vhost: "/", Name: "q", Durable: false})
			return err
		}, ErrInequivalent, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			onLeader, onFollower := tt.write(l.r), tt.write(f.r)
			for node, err := range map[string]error{"leader": onLeader, "follower": onFollower} {
				if !errors.Is(err, tt.is) {
					t.Errorf("on the %s: %v, want errors.Is %v", node, err, tt.is)
				}
				var e *Error
				if tt.typed != errors.As(err, &e) {
					t.Errorf("on the %s: %T, *Error %v", node, err, tt.typed)
				}
			}
			if onLeader == nil || onFollower == nil || onLeader.Error() != onFollower.Error() {
				t.Errorf("leader says %v, follower says %v", onLeader, onFollower)
			}
		})
	}
	// A refused command changed nothing anywhere.
	c.converged(true)
	if got := len(f.r.Queues("")); got != 1 {
		t.Fatalf("%d queues, want 1", got)
	}
}

func TestRaftDeclareReportsCreatedOnceFromAnyNode(t *testing.T) {
	c := newRaftCluster(t, 3, fastTiming)
	must(t, c.leader().r.PutVhost(ctxT(t), Vhost{Name: "/"}))
	var mu sync.Mutex
	created := 0
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		wg.Go(func() {
			ok, err := nd.r.DeclareQueue(ctxT(t), Queue{Vhost: "/", Name: "shared", Durable: true})
			if err != nil {
				t.Errorf("%s: %v", nd.name, err)
			}
			if ok {
				mu.Lock()
				created++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if created != 1 {
		t.Fatalf("%d declares say they created the queue, want 1", created)
	}
}

func TestRaftOneMemberOnTheRealLogStoreRestartsWithItsState(t *testing.T) {
	logDir := t.TempDir()
	open := func() *logstore.Store {
		s, err := logstore.Open(context.Background(), logDir, logstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	c := newRaftClusterOn(t, []logstore.GroupStores{s}, fastTiming)
	nd := c.nodes[0]
	fill(t, nd.r)
	want := dumpJSON(nd.r)
	c.stop(nd)
	must(t, s.Close())

	nd.stores = open()
	defer nd.stores.(*logstore.Store).Close()
	c.start(nd, false)
	must(t, nd.r.Sync(ctxT(t)))
	if got := dumpJSON(nd.r); got != want {
		t.Fatalf("after restart\n%+v\nwant\n%+v", got, want)
	}
	must(t, nd.r.PutVhost(ctxT(t), Vhost{Name: "after-restart"}))
}

func TestRaftSyncAndWritesHonourContext(t *testing.T) {
	c := newRaftCluster(t, 3, fastTiming)
	f := c.follower()
	for _, nd := range c.nodes {
		if nd != f {
			c.stop(nd)
		}
	}
	// No quorum: a write and a Sync wait for one until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := f.r.PutVhost(ctx, Vhost{Name: "x"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write without a quorum: %v, want DeadlineExceeded", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := f.r.Sync(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sync without a quorum: %v, want DeadlineExceeded", err)
	}
	// A write waiting for a quorum when the store closes ends with ErrClosed.
	inFlight := make(chan error, 1)
	go func() { inFlight <- f.r.PutVhost(context.Background(), Vhost{Name: "y"}) }()
	time.Sleep(50 * time.Millisecond) // let it start waiting; it ends either way
	must(t, f.r.Close())
	select {
	case err := <-inFlight:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("write in flight at Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write in flight still waits 5s after Close")
	}
	if err := f.r.PutVhost(context.Background(), Vhost{Name: "x"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v, want ErrClosed", err)
	}
	if slices.ContainsFunc(f.r.Vhosts(), func(v Vhost) bool { return v.Name == "x" }) {
		t.Fatal("a write that failed is visible")
	}
}

// Writes from every node while leadership moves around: each applies
// once (its declare says it created the queue, one event per queue on
// every node), whatever retries the leader changes cause.
func TestRaftWritesApplyOnceWhileLeadershipMoves(t *testing.T) {
	c := newRaftCluster(t, 3, fastTiming)
	must(t, c.leader().r.PutVhost(ctxT(t), Vhost{Name: "/"}))
	stop := make(chan struct{})
	var moves sync.WaitGroup
	moves.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			l := c.leader()
			_ = l.r.Group().TransferLeadership(ctxT(t), "")
		}
	})
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		for w := range 4 {
			wg.Go(func() {
				for i := range 25 {
					name := fmt.Sprintf("%s-%d-%d", nd.name, w, i)
					created, err := nd.r.DeclareQueue(ctxT(t), Queue{Vhost: "/", Name: name, Durable: true})
					if err != nil || !created {
						t.Errorf("declare %s: created %v, %v", name, created, err)
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	moves.Wait()
	c.converged(true)
	if got, want := c.nodes[0].ev.count(QueuePut), 3*4*25; got != want {
		t.Fatalf("%d QueuePut events, want %d", got, want)
	}
}

// A one-member store with the default timing (1s heartbeat timeout) takes
// its first write at once on a fresh start and on a restart: brokers run
// as one-member clusters, so their start must not wait for an election
// timeout.
func TestRaftOneMemberTakesWritesAtOnce(t *testing.T) {
	dir, stores := t.TempDir(), logstore.NewInmem()
	for _, fresh := range []bool{true, false} {
		start := time.Now()
		n := transport.NewInmemHub().Network("n1")
		r, err := OpenRaft(ctxT(t), RaftConfig{Dir: dir, Network: n, Stores: stores, Bootstrap: fresh})
		must(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
		err = r.PutVhost(ctx, Vhost{Name: "v" + strconv.FormatBool(fresh)})
		cancel()
		if err != nil {
			t.Fatalf("fresh %v: first write within 0.9s (a heartbeat timeout is 1s): %v", fresh, err)
		}
		t.Logf("fresh %v: open to first write in %v", fresh, time.Since(start))
		must(t, r.Close())
		must(t, n.Close())
	}
}

// A write forwarded to a leader that stops answering (a paused process, a
// link that black-holes) goes to the next leader once leadership moves,
// instead of waiting for the old one: found by e2e/faults
// TestClusterPausedLeader, where it waited until SIGCONT.
func TestRaftForwardedWriteFollowsANewLeader(t *testing.T) {
	c := newRaftCluster(t, 3, fastTiming)
	old := c.leader()
	var from, next *raftNode
	for _, nd := range c.nodes {
		switch {
		case nd == old:
		case from == nil:
			from = nd
		default:
			next = nd
		}
	}
	called := make(chan struct{}, 1)
	old.r.net.Handle(applyMethod, func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		select {
		case called <- struct{}{}:
		default:
		}
		<-ctx.Done() // a leader that never answers
		return nil, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- from.r.PutVhost(ctx, Vhost{Name: "forwarded"}) }()
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("the write was not forwarded to the leader")
	}
	must(t, old.r.Group().TransferLeadership(ctxT(t), next.name))
	moved := time.Now()
	// The write is acknowledged within 5 s of the leadership's last move
	// away from old. Under load a 150 ms election can hand the leadership
	// back to old (its raft is healthy, only its write handler hangs): the
	// write then rightly waits for old again, so the leadership is moved
	// away again and the 5 s start over.
	eventually.Succeeds(t, 30*time.Second, "the forwarded write acknowledged", func() error {
		select {
		case err := <-errc:
			must(t, err)
			t.Logf("acknowledged %v after the leadership moved", time.Since(moved))
			return nil
		default:
		}
		if old.r.Group().IsLeader() {
			t.Logf("the leadership came back to %s: moving it away again", old.name)
			must(t, old.r.Group().TransferLeadership(ctxT(t), next.name))
			moved = time.Now()
		}
		if since := time.Since(moved); since > 5*time.Second {
			t.Fatalf("a write forwarded to a leader that does not answer is not acknowledged %v after the leadership moved", since)
		}
		return errors.New("not acknowledged yet")
	})
	c.converged(false)
}
