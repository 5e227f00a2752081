package raftgroup

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// fastTiming makes elections take tens of milliseconds.
var fastTiming = Timing{
	HeartbeatTimeout:   50 * time.Millisecond,
	ElectionTimeout:    50 * time.Millisecond,
	LeaderLeaseTimeout: 50 * time.Millisecond,
	CommitTimeout:      5 * time.Millisecond,
}

// listFSM records the commands it applied, in order; its response is the
// number of commands applied so far.
type listFSM struct {
	mu   sync.Mutex
	cmds []string
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(l.Data))
	return len(f.cmds)
}

func (f *listFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return listSnapshot(append([]string(nil), f.cmds...)), nil
}

func (f *listFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	var cmds []string
	for len(b) >= 4 {
		n := binary.BigEndian.Uint32(b)
		cmds = append(cmds, string(b[4:4+n]))
		b = b[4+n:]
	}
	f.mu.Lock()
	f.cmds = cmds
	f.mu.Unlock()
	return nil
}

type listSnapshot []string

func (s listSnapshot) Persist(sink raft.SnapshotSink) error {
	var b []byte
	for _, c := range s {
		b = binary.BigEndian.AppendUint32(b, uint32(len(c)))
		b = append(b, c...)
	}
	if _, err := sink.Write(b); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (listSnapshot) Release() {}

// countingStores counts the log writes (StoreLogs calls) of every group.
type countingStores struct {
	logstore.GroupStores
	writes *atomic.Int64
}

func (c countingStores) Group(id string) logstore.GroupStore {
	return countingGroup{c.GroupStores.Group(id), c.writes}
}

type countingGroup struct {
	logstore.GroupStore
	writes *atomic.Int64
}

func (g countingGroup) StoreLogs(logs []*raft.Log) error {
	g.writes.Add(1)
	return g.GroupStore.StoreLogs(logs)
}

func (g countingGroup) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// node is one member of a test cluster: its stores and dirs outlive a
// restart.
type node struct {
	name   string
	stores logstore.GroupStores
	dir    string
	fsm    *listFSM
	g      *Group
}

type cluster struct {
	t      *testing.T
	hub    *transport.InmemHub
	nodes  []*node
	timing Timing       // what open gives the groups; zero: fastTiming
	logger *slog.Logger // raft's log lines; nil: none
}

// steadyTiming is for tests that need one leader to stay put for a while
// on a loaded machine (fastTiming's 50 ms lease loses it under load); a
// transfer or a bootstrap still elects at once.
var steadyTiming = Timing{
	HeartbeatTimeout:   time.Second,
	ElectionTimeout:    time.Second,
	LeaderLeaseTimeout: 500 * time.Millisecond,
	CommitTimeout:      5 * time.Millisecond,
}

// newCluster opens n nodes (n1, n2...) in a hub; n1 bootstraps, the others
// are added as voters.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	return newClusterTimed(t, n, fastTiming)
}

// newClusterTimed is newCluster with the groups on timing.
func newClusterTimed(t *testing.T, n int, timing Timing) *cluster {
	t.Helper()
	return startCluster(&cluster{t: t, hub: transport.NewInmemHub(), timing: timing}, n)
}

// startCluster opens n nodes in c as newCluster does.
func startCluster(c *cluster, n int) *cluster {
	t := c.t
	t.Helper()
	for i := 1; i <= n; i++ {
		nd := &node{name: "n" + strconv.Itoa(i), stores: logstore.NewInmem(), dir: t.TempDir()}
		c.nodes = append(c.nodes, nd)
		c.open(nd, i == 1)
	}
	leader := c.nodes[0].g
	waitLeader(t, leader)
	for _, nd := range c.nodes[1:] {
		if err := leader.AddVoter(ctxT(t), nd.name); err != nil {
			t.Fatalf("add %s: %v", nd.name, err)
		}
	}
	return c
}

func (c *cluster) open(nd *node, bootstrap bool) {
	c.t.Helper()
	nd.fsm = &listFSM{}
	timing := c.timing
	if timing == (Timing{}) {
		timing = fastTiming
	}
	g, err := Open(Config{
		ID: "g", Node: nd.name, Network: c.hub.Network(nd.name), Stores: nd.stores,
		SnapshotDir: nd.dir, FSM: nd.fsm, Timing: timing, Bootstrap: bootstrap, Logger: c.logger,
	})
	if err != nil {
		c.t.Fatalf("open %s: %v", nd.name, err)
	}
	nd.g = g
	c.t.Cleanup(func() { _ = g.Close() })
}

func (c *cluster) leader() *node {
	c.t.Helper()
	var l *node
	eventually.True(c.t, 5*time.Second, "a leader", func() bool {
		for _, nd := range c.nodes {
			if nd.g != nil && nd.g.IsLeader() {
				l = nd
				return true
			}
		}
		return false
	})
	return l
}

func waitLeader(t *testing.T, g *Group) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := g.WaitLeader(ctx)
	if err != nil {
		t.Fatalf("wait for a leader: %v", err)
	}
	return l
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
