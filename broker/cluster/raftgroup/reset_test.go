package raftgroup

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/brokertest/tmpfs"
	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// Reset wipes a group that is this node alone (its log, term and
// snapshots) and leaves it Fresh, ready to be added to another group by
// that group's leader: added, it receives the other group's entries (not
// its own old ones), and it survives a reopen as a member. A group with
// other members is refused, and keeps working.
func TestResetAloneThenJoinAnotherGroup(t *testing.T) {
	c := newCluster(t, 2) // n1 leads, n2 follows
	hub := c.hub
	lone := &node{name: "n3", stores: logstore.NewInmem(), dir: t.TempDir()}
	c.open(lone, true)
	waitLeader(t, lone.g)
	for _, cmd := range []string{"own1", "own2"} {
		if _, _, err := lone.g.Apply(ctxT(t), []byte(cmd)); err != nil {
			t.Fatal(err)
		}
	}
	onLeader := func(what string, op func(g *Group) error) {
		t.Helper()
		// The leader, whichever it is now (a loaded machine may move it).
		eventually.Succeeds(t, 10*time.Second, what, func() error { return op(c.leader().g) })
	}
	onLeader("apply shared", func(g *Group) error { _, _, err := g.Apply(ctxT(t), []byte("shared")); return err })
	if err := c.nodes[1].g.Reset(ctxT(t), nil); !errors.Is(err, ErrNotAlone) {
		t.Fatalf("reset of a member of two: %v, want ErrNotAlone", err)
	}
	onLeader("apply after a refused reset", func(g *Group) error { _, _, err := g.Apply(ctxT(t), []byte("still")); return err })

	wiped := false
	if err := lone.g.Reset(ctxT(t), func() { wiped = true; lone.fsm.reset() }); err != nil {
		t.Fatal(err)
	}
	if !wiped || !lone.g.Fresh() || lone.g.Leader() != "" {
		t.Fatalf("after reset: wiped %v fresh %v leader %q", wiped, lone.g.Fresh(), lone.g.Leader())
	}
	onLeader("add n3", func(g *Group) error { return g.AddVoter(ctxT(t), "n3") })
	want := []string{"shared", "still"}
	eventually.Succeeds(t, 5*time.Second, "n3 has the group's entries", func() error {
		if got := lone.fsm.list(); !slices.Equal(got, want) {
			return fmt.Errorf("n3 applied %q", got)
		}
		return nil
	})
	if err := lone.g.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := Open(Config{ID: "g", Node: "n3", Network: hub.Network("n3"), Stores: lone.stores, SnapshotDir: lone.dir, FSM: &listFSM{}, Timing: fastTiming})
	if err != nil {
		t.Fatalf("reopen the joined node: %v", err)
	}
	defer g.Close()
	servers, err := g.Configuration(ctxT(t))
	if err != nil || len(servers) != 3 {
		t.Fatalf("the joined node's configuration: %v %v", servers, err)
	}
}

// reset empties the list (what a caller's wipe does).
func (f *listFSM) reset() {
	f.mu.Lock()
	f.cmds = nil
	f.mu.Unlock()
}

// dropFails is a node's log store whose Drop fails (a disk error while a
// reset removes the group's log).
type dropFails struct{ logstore.GroupStores }

func (dropFails) Drop(string) error { return errors.New("disk error") }

// A reset that fails once raft stopped (the log cannot be dropped) leaves
// the group working on the state it had, not dead: writes commit, the FSM
// holds the entries once, and the error says what happened. A reset that
// succeeds forgets the old log's nudge mark, so the new log's first
// writes nudge their followers.
func TestResetFailureKeepsTheGroupWorking(t *testing.T) {
	c := &cluster{t: t, hub: transport.NewInmemHub()}
	lone := &node{name: "n1", stores: dropFails{logstore.NewInmem()}, dir: t.TempDir()}
	c.open(lone, true)
	waitLeader(t, lone.g)
	for _, cmd := range []string{"a", "b"} {
		if _, _, err := lone.g.Apply(ctxT(t), []byte(cmd)); err != nil {
			t.Fatal(err)
		}
	}
	err := lone.g.Reset(ctxT(t), lone.fsm.reset)
	if err == nil || !strings.Contains(err.Error(), "raft started again") {
		t.Fatalf("reset with a failing drop: %v, want an error saying raft started again", err)
	}
	if lone.g.Fresh() {
		t.Fatal("the group reports Fresh while its state is still there")
	}
	if err := lone.g.Down(); err != nil {
		t.Fatalf("the group reports itself down while raft runs again: %v", err)
	}
	eventually.Succeeds(t, 10*time.Second, "a write after the failed reset", func() error {
		_, _, err := lone.g.Apply(ctxT(t), []byte("c"))
		return err
	})
	if got, want := lone.fsm.list(), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("FSM after the failed reset: %q, want %q", got, want)
	}

	ok := &node{name: "n2", stores: logstore.NewInmem(), dir: t.TempDir()}
	c.open(ok, true)
	waitLeader(t, ok.g)
	if _, _, err := ok.g.Apply(ctxT(t), []byte("x")); err != nil {
		t.Fatal(err)
	}
	ok.g.nudged.Store(1 << 40) // as after a long life
	if err := ok.g.Reset(ctxT(t), ok.fsm.reset); err != nil {
		t.Fatal(err)
	}
	if m := ok.g.nudged.Load(); m != 0 {
		t.Fatalf("nudge mark after a reset: %d, want 0 (the new log's writes would skip their nudge)", m)
	}
}

// A reset on a disk gone read-only (the kernel remounts a filesystem so
// after I/O errors) can neither remove the snapshots nor start raft again:
// raft's snapshot store cannot write there. The group is then down on this
// node until it restarts: the reset's error and Down say so (ErrClosed,
// restart the node), and every call fails with ErrClosed. A group that
// runs is not down, nor is one closed.
func TestResetOnAReadOnlyDiskLeavesTheGroupDown(t *testing.T) {
	c := &cluster{t: t, hub: transport.NewInmemHub()}
	lone := &node{name: "n1", stores: logstore.NewInmem(), dir: tmpfs.Mount(t, 1<<20)}
	c.open(lone, true)
	waitLeader(t, lone.g)
	if _, _, err := lone.g.Apply(ctxT(t), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := lone.g.Down(); err != nil {
		t.Fatalf("a running group reports itself down: %v", err)
	}
	tmpfs.ReadOnly(t, lone.dir)

	err := lone.g.Reset(ctxT(t), lone.fsm.reset)
	if !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "restart the node") {
		t.Fatalf("reset on a read-only disk: %v, want ErrClosed saying to restart the node", err)
	}
	down := lone.g.Down()
	if !errors.Is(down, ErrClosed) || !strings.Contains(down.Error(), "read-only file system") {
		t.Fatalf("Down after the failed reset: %v, want ErrClosed with the cause", down)
	}
	if _, _, err := lone.g.Apply(ctxT(t), []byte("b")); !errors.Is(err, ErrClosed) {
		t.Errorf("apply on the group that is down: %v, want ErrClosed", err)
	}
	if err := lone.g.Reset(ctxT(t), lone.fsm.reset); !errors.Is(err, ErrClosed) {
		t.Errorf("a second reset: %v, want ErrClosed", err)
	}
	if err := lone.g.Close(); err != nil {
		t.Errorf("close the group that is down: %v", err)
	}
}
