package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/raftgroup"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// fastTiming makes elections and failovers take tens of milliseconds.
var fastTiming = raftgroup.Timing{
	HeartbeatTimeout:   150 * time.Millisecond,
	ElectionTimeout:    150 * time.Millisecond,
	LeaderLeaseTimeout: 100 * time.Millisecond,
	CommitTimeout:      5 * time.Millisecond,
}

// events records what a node's subscriber saw, in order.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, fmt.Sprintf("%d %s %s", ev.Kind, ev.Vhost, ev.Name))
}

func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

func (e *events) count(kind EventKind) int {
	n := 0
	prefix := strconv.Itoa(int(kind)) + " "
	for _, s := range e.get() {
		if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// networks hands out the test nodes' Networks: a node's open one, or a new
// one after it was closed (a restart).
type networks interface {
	network(node string) transport.Network
	close(node string) error
}

type inmemNetworks struct{ hub *transport.InmemHub }

func (n inmemNetworks) network(node string) transport.Network { return n.hub.Network(node) }
func (n inmemNetworks) close(node string) error               { return n.hub.Network(node).Close() }

// grpcNetworks are gRPC Networks on loopback ports that know each other's
// addresses.
type grpcNetworks struct {
	t    testing.TB
	mu   sync.Mutex
	nets map[string]*transport.GRPCNetwork
}

func newGRPCNetworks(t testing.TB) *grpcNetworks {
	return &grpcNetworks{t: t, nets: map[string]*transport.GRPCNetwork{}}
}

func (g *grpcNetworks) network(node string) transport.Network {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := g.nets[node]; n != nil {
		return n
	}
	n, err := transport.NewGRPC(transport.Config{Node: node, Addr: "127.0.0.1:0", Secret: "test-secret", Logger: testLogger(g.t)})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { _ = n.Close() })
	g.nets[node] = n
	for name, peer := range g.nets {
		if name != node {
			if err := errors.Join(peer.SetAddress(node, n.Addr().String()), n.SetAddress(name, peer.Addr().String())); err != nil {
				g.t.Fatal(err)
			}
		}
	}
	return n
}

func (g *grpcNetworks) close(node string) error {
	g.mu.Lock()
	n := g.nets[node]
	delete(g.nets, node)
	g.mu.Unlock()
	if n == nil {
		return nil
	}
	return n.Close()
}

// raftNode is one member of a test cluster; its stores and dir outlive a
// restart.
type raftNode struct {
	name   string
	stores logstore.GroupStores
	dir    string
	r      *Raft
	ev     *events
}

type raftCluster struct {
	t      testing.TB
	nets   networks
	timing raftgroup.Timing
	logger *slog.Logger
	nodes  []*raftNode
}

// newRaftCluster starts n nodes (n1...) on in-memory log stores; n1
// bootstraps and adds the others.
func newRaftCluster(t testing.TB, n int, timing raftgroup.Timing) *raftCluster {
	t.Helper()
	stores := make([]logstore.GroupStores, n)
	for i := range stores {
		stores[i] = logstore.NewInmem()
	}
	return newRaftClusterOn(t, stores, timing)
}

func newRaftClusterOn(t testing.TB, stores []logstore.GroupStores, timing raftgroup.Timing) *raftCluster {
	t.Helper()
	return newRaftClusterNet(t, stores, timing, inmemNetworks{transport.NewInmemHub()})
}

// newRaftClusterNet is newRaftClusterOn with the nodes' Networks from nets.
func newRaftClusterNet(t testing.TB, stores []logstore.GroupStores, timing raftgroup.Timing, nets networks) *raftCluster {
	t.Helper()
	c := &raftCluster{t: t, nets: nets, timing: timing, logger: testLogger(t)}
	for i, s := range stores {
		nd := &raftNode{name: "n" + strconv.Itoa(i+1), stores: s, dir: t.TempDir()}
		c.nodes = append(c.nodes, nd)
		c.start(nd, i == 0)
	}
	first := c.nodes[0].r.Group()
	if _, err := first.WaitLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.nodes[1:] {
		if err := first.AddVoter(ctxT(t), nd.name); err != nil {
			t.Fatalf("add %s: %v", nd.name, err)
		}
	}
	return c
}

// start opens (or reopens) nd's store and subscribes its event log.
func (c *raftCluster) start(nd *raftNode, bootstrap bool) {
	c.t.Helper()
	r, err := OpenRaft(ctxT(c.t), RaftConfig{Dir: nd.dir, Network: c.nets.network(nd.name), Stores: nd.stores, Logger: c.logger,
		Timing: c.timing, Bootstrap: bootstrap})
	if err != nil {
		c.t.Fatalf("open %s: %v", nd.name, err)
	}
	nd.r = r
	nd.ev = &events{}
	r.Subscribe(nd.ev.add)
	c.t.Cleanup(func() { _ = r.Close() })
}

// stop closes nd's store and its Network, as a node going down.
func (c *raftCluster) stop(nd *raftNode) {
	c.t.Helper()
	if err := nd.r.Close(); err != nil {
		c.t.Fatalf("close %s: %v", nd.name, err)
	}
	if err := c.nets.close(nd.name); err != nil {
		c.t.Fatalf("close %s's network: %v", nd.name, err)
	}
	nd.r = nil
}

// leader waits for a leader among the running nodes.
func (c *raftCluster) leader() *raftNode {
	c.t.Helper()
	var l *raftNode
	eventually.True(c.t, 5*time.Second, "a leader", func() bool {
		for _, nd := range c.nodes {
			if nd.r != nil && nd.r.Group().IsLeader() {
				l = nd
				return true
			}
		}
		return false
	})
	return l
}

// follower is a running node that does not lead.
func (c *raftCluster) follower() *raftNode {
	c.t.Helper()
	l := c.leader()
	for _, nd := range c.nodes {
		if nd != l && nd.r != nil {
			return nd
		}
	}
	c.t.Fatal("no follower running")
	return nil
}

// converged waits until every running node's dump (and with sameEvents
// the events its subscriber saw) equal the first running node's.
func (c *raftCluster) converged(sameEvents bool) {
	c.t.Helper()
	eventually.Succeeds(c.t, 10*time.Second, "every node has the same state and events", func() error {
		var ref *raftNode
		for _, nd := range c.nodes {
			if nd.r == nil {
				continue
			}
			if ref == nil {
				ref = nd
				continue
			}
			if a, b := dumpJSON(ref.r), dumpJSON(nd.r); a != b {
				return fmt.Errorf("%s has %s, %s has %s", ref.name, a, nd.name, b)
			}
			if a, b := ref.ev.get(), nd.ev.get(); sameEvents && !slices.Equal(a, b) {
				return fmt.Errorf("%s saw %d events, %s saw %d (or others)", ref.name, len(a), nd.name, len(b))
			}
		}
		return nil
	})
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dumpJSON is a store's whole state as comparable text.
func dumpJSON(s Store) string {
	b, err := json.Marshal(dumpOf(s))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// testLogger writes warnings and errors (raft's elections, retried
// writes...) to the test's log, until the test's cleanup.
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
