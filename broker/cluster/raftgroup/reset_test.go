package raftgroup

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/logstore"
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
