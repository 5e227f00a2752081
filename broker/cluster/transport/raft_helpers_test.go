package transport

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/clustertest"
	"github.com/warrenmq/warren/broker/cluster/logstore"
)

// member is one node's member of one Raft group, on the node's Network.
type member struct {
	node string
	fsm  *clustertest.Counter
	r    *raft.Raft
}

func raftConfig(node string) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(node)
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 150 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.TrailingLogs = 5 // a snapshot compacts, so a lagging node needs InstallSnapshot
	c.LogOutput = io.Discard
	return c
}

// startGroup starts group id on every Network, bootstrapped with all of
// them as voters (node names as ids and addresses).
func startGroup(t *testing.T, nets []Network, id string) []*member {
	t.Helper()
	var conf raft.Configuration
	for _, n := range nets {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(n.Node()), Address: raft.ServerAddress(n.Node())})
	}
	ms := make([]*member, len(nets))
	for i, n := range nets {
		store := logstore.NewInmem().Group(id)
		snaps := raft.NewInmemSnapshotStore()
		trans := n.Group(id)
		cfg := raftConfig(n.Node())
		must(t, raft.BootstrapCluster(cfg, store, store, snaps, trans, conf))
		m := &member{node: n.Node(), fsm: &clustertest.Counter{}}
		r, err := raft.NewRaft(cfg, m.fsm, store, store, snaps, trans)
		must(t, err)
		m.r = r
		ms[i] = m
		t.Cleanup(func() { _ = r.Shutdown().Error() })
	}
	return ms
}

// waitLeader waits for a leader among ms other than the nodes in not.
func waitLeader(t *testing.T, ms []*member, not ...string) *member {
	t.Helper()
	var leader *member
	eventually.True(t, 20*time.Second, "a leader is elected", func() bool {
		for _, m := range ms {
			if m.r.State() == raft.Leader && !contains(not, m.node) {
				leader = m
				return true
			}
		}
		return false
	})
	return leader
}

// applyN commits n commands named prefix-0... on the leader among ms (not
// one in not); one that met a lost leadership goes again.
func applyN(t *testing.T, ms []*member, prefix string, n int, not ...string) {
	t.Helper()
	for i := 0; i < n; {
		err := waitLeader(t, ms, not...).r.Apply(fmt.Appendf(nil, "%s-%d", prefix, i), 5*time.Second).Error()
		switch {
		case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
		case err != nil:
			t.Fatal(err)
		default:
			i++
		}
	}
}

// waitApplied waits until every member of ms not in not applied want commands.
func waitApplied(t *testing.T, ms []*member, want int, not ...string) {
	t.Helper()
	for _, m := range ms {
		if contains(not, m.node) {
			continue
		}
		eventually.True(t, 20*time.Second, fmt.Sprintf("%s applies %d commands", m.node, want), func() bool { return m.fsm.Count() == want })
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
