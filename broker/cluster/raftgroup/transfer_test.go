package raftgroup

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// raft gives a leadership transfer one election timeout to catch the
// target up and see it win; a target that cannot within it (here: cut off
// from the leader for a while) makes raft give up while the leader still
// leads. TransferLeadership goes again until its ctx ends, so the
// leadership moves once the target is reachable: a drain on a loaded
// machine, whose target is slow to elect, does not fail.
func TestTransferLeadershipOutlastsRaftsTimeout(t *testing.T) {
	gaveUp := &messageSeen{msg: "leadership transfer timeout", seen: make(chan struct{})}
	c := startCluster(&cluster{t: t, hub: transport.NewInmemHub(), timing: steadyTiming, logger: slog.New(gaveUp)}, 3)
	l := c.leader()
	target := c.nodes[1]
	if target == l {
		target = c.nodes[2]
	}
	c.hub.Partition(l.name, target.name)
	if _, _, err := l.g.Apply(ctxT(t), []byte("behind")); err != nil { // the target misses it
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- l.g.TransferLeadership(ctx, target.name) }()
	select {
	case <-gaveUp.seen:
	case err := <-errc:
		t.Fatalf("a transfer to a node the leader cannot reach ended before raft gave up on it: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("raft did not give the transfer up within 10 s")
	}
	if !l.g.IsLeader() {
		t.Fatalf("%s no longer leads after raft gave the transfer up", l.name)
	}
	c.hub.Heal()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("transfer once the target is reachable again: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the transfer did not end within 20 s of the target becoming reachable")
	}
	for _, nd := range c.nodes {
		eventually.True(t, 5*time.Second, nd.name+" sees "+target.name+" lead", func() bool { return nd.g.Leader() == target.name })
	}
	eventually.True(t, 5*time.Second, target.name+" applies what it missed", func() bool {
		return slices.Contains(target.fsm.list(), "behind")
	})
}

// messageSeen is a slog handler that closes seen at the first record with
// message msg.
type messageSeen struct {
	msg  string
	seen chan struct{}
	once sync.Once
}

func (h *messageSeen) Enabled(context.Context, slog.Level) bool { return true }
func (h *messageSeen) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h *messageSeen) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *messageSeen) WithGroup(string) slog.Handler      { return h }
