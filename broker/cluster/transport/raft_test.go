package transport

import (
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/tlstest"
)

// fabric is a set of connected Networks with fault controls, one per
// implementation under test.
type fabric struct {
	nets    []Network
	isolate func(node string) // cut node off from every other node
	heal    func()
}

var fabrics = []struct {
	name string
	make func(t *testing.T, nodes int) *fabric
}{
	{"inmem", inmemFabric},
	{"grpc", grpcFabric},
	{"grpc-mtls", func(t *testing.T, nodes int) *fabric {
		ca := tlstest.NewCA(t, "cluster")
		return grpcFabricTLS(t, nodes, func(string) *tls.Config { return nodeTLS(t, ca, true) })
	}},
}

func inmemFabric(t *testing.T, nodes int) *fabric {
	hub := NewInmemHub()
	f := &fabric{isolate: hub.Isolate, heal: hub.Heal}
	for i := range nodes {
		n := hub.Network(fmt.Sprintf("n%d", i+1))
		t.Cleanup(func() { _ = n.Close() })
		f.nets = append(f.nets, n)
	}
	return f
}

// Three nodes, two Raft groups on each node's one Network: both groups
// elect and commit everywhere; with the leader of the first group cut off,
// the others elect a new leader and commit (and compact, so the old leader
// needs a snapshot); healed, every node converges on every entry and the
// old leader follows.
func TestRaftGroupsElectFailOverAndConverge(t *testing.T) {
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 3)
			a := startGroup(t, f.nets, "meta")
			b := startGroup(t, f.nets, "q/orders")
			applyN(t, a, "a", 10)
			applyN(t, b, "b", 10)
			waitApplied(t, a, 10)
			waitApplied(t, b, 10)

			old := waitLeader(t, a)
			f.isolate(old.node)
			fresh := waitLeader(t, a, old.node)
			if fresh.node == old.node {
				t.Fatalf("the cut-off leader %s is still the only leader", old.node)
			}
			applyN(t, a, "c", 20, old.node)
			waitApplied(t, a, 30, old.node)
			for _, m := range a { // whoever leads after the heal has compacted
				if m != old {
					must(t, m.r.Snapshot().Error())
				}
			}
			if old.fsm.Count() != 10 {
				t.Fatalf("the cut-off node applied %d commands, want 10", old.fsm.Count())
			}

			f.heal()
			waitApplied(t, a, 30)
			// Raft restores the FSM before it records the snapshot.
			eventually.True(t, 10*time.Second, "the old leader caught up by InstallSnapshot", func() bool {
				return old.r.Stats()["last_snapshot_index"] != "0"
			})
			applyN(t, b, "d", 10)
			waitApplied(t, b, 20)
			eventually.True(t, 20*time.Second, "the old leader follows", func() bool {
				return old.r.State() == raft.Follower && string(old.r.Leader()) != old.node && old.r.Leader() != ""
			})
		})
	}
}
