package logstore

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/clustertest"
)

// member is one Raft group's member on one node: its FSM and raft over the
// node's shared Store.
type member struct {
	id    raft.ServerID
	fsm   *clustertest.Counter
	snaps raft.SnapshotStore
	trans *raft.InmemTransport
	r     *raft.Raft
}

func raftConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.TrailingLogs = 10 // a snapshot compacts the store
	c.LogOutput = io.Discard
	return c
}

// start starts m's raft on group of store (bootstrapping conf if given).
func (m *member) start(t *testing.T, store GroupStores, group string, boot *raft.Configuration) {
	t.Helper()
	g := store.Group(group)
	conf := raftConfig(m.id)
	if boot != nil {
		must(t, raft.BootstrapCluster(conf, g, g, m.snaps, m.trans, *boot))
	}
	r, err := raft.NewRaft(conf, m.fsm, g, g, m.snaps, m.trans)
	must(t, err)
	m.r = r
	t.Cleanup(func() { _ = r.Shutdown().Error() }) // before its store closes
}

func (m *member) stop(t *testing.T) {
	t.Helper()
	must(t, m.r.Shutdown().Error())
}

// applyN commits n commands named prefix-0...; a command that met a lost
// leadership goes again to the new leader (the FSM counts it once).
func applyN(t *testing.T, ms []*member, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; {
		err := waitLeader(t, ms).r.Apply([]byte(fmt.Sprintf("%s-%d", prefix, i)), 5*time.Second).Error()
		switch {
		case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrNotLeader):
		case err != nil:
			t.Fatal(err)
		default:
			i++
		}
	}
}

func waitLeader(t *testing.T, ms []*member) *member {
	t.Helper()
	var leader *member
	eventually.True(t, 10*time.Second, "a leader is elected", func() bool {
		for _, m := range ms {
			if m.r != nil && m.r.State() == raft.Leader {
				leader = m
				return true
			}
		}
		return false
	})
	return leader
}

// A one-node group elects itself, commits, compacts after a snapshot and,
// after a restart on the reopened store, has every entry back.
func TestRaftSingleNodeOnTheStore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{SegmentBytes: 8 << 10})
	_, trans := raft.NewInmemTransport("n1")
	m := &member{id: "n1", fsm: &clustertest.Counter{}, snaps: raft.NewInmemSnapshotStore(), trans: trans}
	m.start(t, s, "meta", &raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: trans.LocalAddr()}}})
	applyN(t, []*member{m}, "a", 200)
	must(t, m.r.Snapshot().Error())
	applyN(t, []*member{m}, "b", 100)
	g := s.Group("meta")
	first, _ := g.FirstIndex()
	if first <= 1 {
		t.Fatalf("FirstIndex %d after a snapshot: raft did not compact through the store", first)
	}
	m.stop(t)
	must(t, s.Close())

	s = open(t, dir, Options{SegmentBytes: 8 << 10})
	m.fsm = &clustertest.Counter{}
	m.start(t, s, "meta", nil)
	applyN(t, []*member{m}, "c", 1)
	eventually.True(t, 5*time.Second, "the restarted node applies its log again", func() bool { return m.fsm.Count() == 301 })
	m.stop(t)
}

// Three nodes, each with one Store shared by two Raft groups: both groups
// elect, commit on all nodes, and a follower restarted on its reopened
// store catches up.
func TestRaftThreeNodesTwoGroupsShareEachNodesStore(t *testing.T) {
	const nodes = 3
	groups := []string{"meta", "q/orders"}
	dirs := make([]string, nodes)
	stores := make([]*Store, nodes)
	for i := range nodes {
		dirs[i] = t.TempDir()
		stores[i] = open(t, dirs[i], Options{})
	}
	members := map[string][]*member{}
	for _, grp := range groups {
		var conf raft.Configuration
		ms := make([]*member, nodes)
		for i := range nodes {
			id := raft.ServerID(fmt.Sprintf("n%d", i+1))
			addr, trans := raft.NewInmemTransport(raft.ServerAddress(grp + "@" + string(id)))
			ms[i] = &member{id: id, fsm: &clustertest.Counter{}, snaps: raft.NewInmemSnapshotStore(), trans: trans}
			conf.Servers = append(conf.Servers, raft.Server{ID: id, Address: addr})
		}
		connect(ms)
		for i, m := range ms {
			m.start(t, stores[i], grp, &conf)
		}
		members[grp] = ms
	}
	for _, grp := range groups {
		applyN(t, members[grp], "a", 50)
	}
	for _, grp := range groups {
		for _, m := range members[grp] {
			eventually.True(t, 10*time.Second, fmt.Sprintf("%s on %s applies 50", grp, m.id), func() bool { return m.fsm.Count() == 50 })
		}
	}

	// Restart a follower of meta (with its member of every group).
	leader := waitLeader(t, members["meta"])
	fi := 0
	for i, m := range members["meta"] {
		if m != leader {
			fi = i
			break
		}
	}
	for _, grp := range groups {
		members[grp][fi].stop(t)
	}
	must(t, stores[fi].Close())
	for _, grp := range groups {
		applyN(t, members[grp], "b", 10)
	}
	stores[fi] = open(t, dirs[fi], Options{})
	for _, grp := range groups {
		m := members[grp][fi]
		_, m.trans = raft.NewInmemTransport(m.trans.LocalAddr())
		m.fsm = &clustertest.Counter{}
		connect(members[grp])
		m.start(t, stores[fi], grp, nil)
	}
	for _, grp := range groups {
		m := members[grp][fi]
		eventually.True(t, 10*time.Second, fmt.Sprintf("restarted %s of %s catches up to 60", m.id, grp), func() bool { return m.fsm.Count() == 60 })
	}
	for _, grp := range groups {
		for _, m := range members[grp] {
			m.stop(t)
		}
	}
}

func connect(ms []*member) {
	for _, a := range ms {
		for _, b := range ms {
			if a != b {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
}

// The in-memory twin runs raft behind the same GroupStores interface.
func TestRaftOnTheInmemTwin(t *testing.T) {
	var stores GroupStores = NewInmem()
	if stores.Group("meta") != stores.Group("meta") {
		t.Fatal("Group returns another store for the same id")
	}
	_, trans := raft.NewInmemTransport("n1")
	m := &member{id: "n1", fsm: &clustertest.Counter{}, snaps: raft.NewInmemSnapshotStore(), trans: trans}
	m.start(t, stores, "meta", &raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: trans.LocalAddr()}}})
	applyN(t, []*member{m}, "a", 10)
	if last, _ := stores.Group("meta").LastIndex(); last < 10 {
		t.Fatalf("LastIndex %d after 10 commands", last)
	}
	m.stop(t)
}
