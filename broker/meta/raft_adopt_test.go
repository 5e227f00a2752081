package meta

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/raftgroup"
)

// reopenAs opens nd's data (stores, dir) as node name with AdoptAlone,
// as a node without seeds restarts.
func (c *raftCluster) reopenAs(nd *raftNode, name, incarnation string) (*Raft, error) {
	c.t.Helper()
	r, err := OpenRaft(ctxT(c.t), RaftConfig{Dir: nd.dir, Network: c.nets.network(name), Stores: nd.stores, Logger: c.logger,
		Timing: c.timing, AdoptAlone: true, Incarnation: incarnation})
	if err == nil {
		c.t.Cleanup(func() { _ = r.Close() })
	}
	return r, err
}

// A node whose group configuration is one other voter takes that group
// over only when the metadata shows the voter was this node (its
// incarnation id), alone: a renamed single node keeps its metadata, but a
// node that left a cluster of two (its last configuration is the other
// member alone) must not fork that cluster into a second one with the
// same history.
func TestAdoptAloneTakesOverOnlyThisNodesOwnGroup(t *testing.T) {
	t.Run("renamed single node", func(t *testing.T) {
		c := newRaftCluster(t, 1, fastTiming)
		n1 := c.nodes[0]
		if err := n1.r.PutNode(ctxT(t), Node{Name: "n1", Address: "a:1", ID: "inc-1"}); err != nil {
			t.Fatal(err)
		}
		if err := n1.r.PutVhost(ctxT(t), Vhost{Name: "kept"}); err != nil {
			t.Fatal(err)
		}
		c.stop(n1)
		if _, err := c.reopenAs(n1, "renamed", "inc-other"); !errors.Is(err, raftgroup.ErrNotMember) {
			t.Fatalf("another incarnation adopted the group: %v", err)
		}
		r, err := c.reopenAs(n1, "renamed", "inc-1")
		if err != nil {
			t.Fatalf("the renamed node did not adopt its group: %v", err)
		}
		if _, err := r.Group().WaitLeader(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if _, ok := r.Vhost("kept"); !ok {
			t.Error("the adopted metadata lost vhost kept")
		}
	})
	t.Run("a node that left a cluster of two", func(t *testing.T) {
		c := newRaftCluster(t, 2, fastTiming)
		n1, n2 := c.nodes[0], c.nodes[1]
		for _, n := range []Node{{Name: "n1", Address: "a:1", ID: "inc-1"}, {Name: "n2", Address: "a:2", ID: "inc-2"}} {
			if err := n1.r.PutNode(ctxT(t), n); err != nil {
				t.Fatal(err)
			}
		}
		if err := n1.r.PutVhost(ctxT(t), Vhost{Name: "shared"}); err != nil {
			t.Fatal(err)
		}
		c.converged(false)
		// n2 leaves: the leader removes it, and replicates the new
		// configuration (n1 alone) to it before it stops.
		if err := c.leader().r.Group().RemoveServer(ctxT(t), "n2"); err != nil {
			t.Fatal(err)
		}
		eventually.Succeeds(t, 5*time.Second, "n2's configuration is n1 alone", func() error {
			servers, err := n2.r.Group().Configuration(ctxT(t))
			if err != nil {
				return err
			}
			if !slices.Equal(servers, []raftgroup.Server{{Node: "n1", Voter: true}}) {
				return errors.New("n2 still has " + serversString(servers))
			}
			return nil
		})
		c.stop(n2)
		// n2 starts again with no seeds (AdoptAlone): it must not make
		// itself a second leader of n1's metadata.
		r, err := c.reopenAs(n2, "n2", "inc-2")
		if !errors.Is(err, raftgroup.ErrNotMember) {
			leader := ""
			if err == nil {
				leader, _ = r.Group().WaitLeader(ctxT(t))
			}
			t.Fatalf("the node that left opened its old group (leader %q, err %v): a forked cluster", leader, err)
		}
	})
}

func serversString(servers []raftgroup.Server) string {
	s := ""
	for _, sv := range servers {
		s += sv.Node + " "
	}
	return s
}
