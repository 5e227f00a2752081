package meta

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/logstore"
)

// Three nodes on the gRPC Network over loopback sockets and real log
// stores: a follower's write, a refusal's error, a failover, and a node
// that catches up by snapshot, as on the twin.
func TestRaftOverGRPC(t *testing.T) {
	stores := make([]logstore.GroupStores, 3)
	for i := range stores {
		s, err := logstore.Open(context.Background(), t.TempDir(), logstore.Options{})
		must(t, err)
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	timing := fastTiming
	timing.TrailingLogs = 8
	c := newRaftClusterNet(t, stores, timing, newGRPCNetworks(t))

	f := c.follower()
	fill(t, f.r)
	c.converged(true)

	_, errL := c.leader().r.DeclareQueue(ctxT(t), Queue{Vhost: "/", Name: "q1", Durable: false})
	_, errF := f.r.DeclareQueue(ctxT(t), Queue{Vhost: "/", Name: "q1", Durable: false})
	var e *Error
	if !errors.As(errF, &e) || !errors.Is(errF, ErrInequivalent) || errL == nil || errF.Error() != errL.Error() {
		t.Fatalf("inequivalent declare: leader %v, follower %v (%T)", errL, errF, errF)
	}
	if err := f.r.PutQueue(ctxT(t), Queue{Vhost: "nope", Name: "q"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("queue in a missing vhost from a follower: %v", err)
	}

	// The leader goes down; the others elect and go on.
	old := c.leader()
	c.stop(old)
	var next *raftNode
	eventually.True(t, 10*time.Second, "a new leader", func() bool {
		for _, nd := range c.nodes {
			if nd.r != nil && nd.r.Group().IsLeader() {
				next = nd
				return true
			}
		}
		return false
	})
	for i := range 30 {
		must(t, next.r.PutQueue(ctxT(t), Queue{Vhost: "/", Name: "after" + strconv.Itoa(i), Durable: true}))
	}
	// Every node left snapshots: under load the leadership may move from
	// next to the other one before old is back, and whoever leads must
	// have compacted its log.
	for _, nd := range c.nodes {
		if nd != old {
			must(t, nd.r.Group().Snapshot(ctxT(t)))
		}
	}

	// The old leader comes back on a new port, behind by more than the
	// trailing logs: a snapshot over the wire, a Reset, then the log.
	c.start(old, false)
	must(t, old.r.Sync(ctxT(t)))
	if got := len(old.r.Queues("/")); got != 31 {
		t.Fatalf("the restarted node has %d queues in /, want 31", got)
	}
	if old.ev.count(Reset) != 1 {
		t.Fatalf("the restarted node's events %v, want one Reset", old.ev.get())
	}
	must(t, old.r.PutVhost(ctxT(t), Vhost{Name: "from-the-old-leader"}))
	c.converged(false)
}
