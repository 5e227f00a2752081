package transport

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/logstore"
)

// counter is a raft.FSM that records the distinct commands it applied.
type counter struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (c *counter) Apply(l *raft.Log) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[string(l.Data)] = true
	return nil
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *counter) Snapshot() (raft.FSMSnapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.seen))
	for k := range c.seen {
		keys = append(keys, k)
	}
	return snap(strings.Join(keys, "\n")), nil
}

func (c *counter) Restore(r io.ReadCloser) error {
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = map[string]bool{}
	for _, k := range strings.Split(string(b), "\n") {
		if k != "" {
			c.seen[k] = true
		}
	}
	return nil
}

type snap string

func (s snap) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write([]byte(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (snap) Release() {}

// member is one node's member of one Raft group, on the node's Network.
type member struct {
	node string
	fsm  *counter
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
		m := &member{node: n.Node(), fsm: &counter{}}
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
		eventually.True(t, 20*time.Second, fmt.Sprintf("%s applies %d commands", m.node, want), func() bool { return m.fsm.count() == want })
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
