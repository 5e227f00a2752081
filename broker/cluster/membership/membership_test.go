package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/clustertest"
	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/raftgroup"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// directory is the in-memory twin of the replicated member table: one
// table every node of a test reads.
type directory struct {
	mu    sync.Mutex
	nodes map[string]Node
}

func (d *directory) PutNode(_ context.Context, n Node) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodes[n.Name] = n
	return nil
}

func (d *directory) DeleteNode(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.nodes, name)
	return nil
}

func (d *directory) Nodes() []Node {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Node
	for _, n := range d.nodes {
		out = append(out, n)
	}
	return out
}

func (d *directory) Node(name string) (Node, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.nodes[name]
	return n, ok
}

// world is a test's nodes on one in-memory hub.
type world struct {
	t     *testing.T
	hub   *transport.InmemHub
	dir   *directory
	mu    sync.Mutex
	addrs map[string]string // address -> node name of the running nodes
	disk  string            // the nodes' join markers (they survive a restart)
}

type member struct {
	name  string
	group *raftgroup.Group
	m     *Membership
	net   transport.Network
}

func newWorld(t *testing.T) *world {
	return &world{t: t, hub: transport.NewInmemHub(), dir: &directory{nodes: map[string]Node{}}, addrs: map[string]string{}, disk: t.TempDir()}
}

func (w *world) hello(_ context.Context, addr string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	name, ok := w.addrs[addr]
	if !ok {
		return "", status.Errorf(codes.Unavailable, "nothing listens on %s", addr)
	}
	return name, nil
}

// start opens a node's group and membership; id is its incarnation.
func (w *world) start(name, id string, seeds []string, dns string) *member {
	w.t.Helper()
	net := w.hub.Network(name)
	g, err := raftgroup.Open(raftgroup.Config{
		ID: "meta", Node: name, Network: net, Stores: logstore.NewInmem(), SnapshotDir: w.t.TempDir(), FSM: &clustertest.Counter{},
		Timing: raftgroup.Timing{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	m := New(Config{
		Self:  Node{Name: name, Address: "addr-" + name, ID: id},
		Seeds: seeds, DNS: dns, DefaultPort: "25672",
		Lookup: func(context.Context, string) ([]string, error) {
			return []string{"dns-a", "dns-b", "dns-c"}, nil
		},
		Network: net, Hello: w.hello, Group: g, Directory: w.dir, JoinMarker: w.marker(name),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryInterval: 50 * time.Millisecond,
	})
	w.mu.Lock()
	w.addrs["addr-"+name] = name
	w.mu.Unlock()
	w.t.Cleanup(func() { g.Close(); net.Close() })
	return &member{name: name, group: g, m: m, net: net}
}

// marker is where node name records the cluster it is joining.
func (w *world) marker(name string) string { return filepath.Join(w.disk, name, "joining.json") }

func (w *world) stop(mb *member) {
	w.mu.Lock()
	delete(w.addrs, "addr-"+mb.name)
	w.mu.Unlock()
	mb.group.Close()
	mb.net.Close()
}

func voters(t *testing.T, g *raftgroup.Group) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	servers, err := g.Configuration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range servers {
		if s.Voter {
			out = append(out, s.Node)
		}
	}
	slices.Sort(out)
	return out
}

func startAll(t *testing.T, ms ...*member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, len(ms))
	for _, mb := range ms {
		go func() { errs <- mb.m.Start(ctx) }()
	}
	for range ms {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestNodesStartedTogetherFormOneCluster(t *testing.T) {
	seeds := []string{"addr-warren@c", "addr-warren@a", "addr-warren@b"}
	tests := []struct {
		name  string
		seeds []string
		dns   string
	}{
		{"seeds, each node listing itself", seeds, ""},
		{"DNS records", nil, "peers.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			if tt.dns != "" {
				// The twin's DNS answers dns-a, dns-b, dns-c: map them to nodes.
				w.addrs["dns-a:25672"], w.addrs["dns-b:25672"], w.addrs["dns-c:25672"] = "warren@a", "warren@b", "warren@c"
			}
			a := w.start("warren@a", "ia", tt.seeds, tt.dns)
			b := w.start("warren@b", "ib", tt.seeds, tt.dns)
			c := w.start("warren@c", "ic", tt.seeds, tt.dns)
			startAll(t, c, b, a)
			want := []string{"warren@a", "warren@b", "warren@c"}
			for _, mb := range []*member{a, b, c} {
				eventually.Succeeds(t, 10*time.Second, "the cluster's voters", func() error {
					if got := voters(t, mb.group); !slices.Equal(got, want) {
						return fmt.Errorf("%s sees voters %v", mb.name, got)
					}
					return nil
				})
			}
			for _, n := range want {
				if got, ok := w.dir.Node(n); !ok || got.Address != "addr-"+n {
					t.Fatalf("directory entry of %s: %+v %v", n, got, ok)
				}
			}
		})
	}
}

func TestALoneNodeFormsItsOwnCluster(t *testing.T) {
	w := newWorld(t)
	a := w.start("warren@solo", "i1", nil, "")
	startAll(t, a)
	if got := voters(t, a.group); !slices.Equal(got, []string{"warren@solo"}) {
		t.Fatalf("voters %v", got)
	}
}

func TestNoClusterFormsUntilEverySeedAnswers(t *testing.T) {
	w := newWorld(t)
	seeds := []string{"addr-warren@a", "addr-warren@b"}
	b := w.start("warren@b", "ib", seeds, "")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := b.m.Start(ctx); err == nil {
		t.Fatal("warren@b formed a cluster while warren@a, the smallest name, never answered")
	}
	if b.group.Leader() != "" {
		t.Fatalf("a leader %q with no cluster formed", b.group.Leader())
	}
	a := w.start("warren@a", "ia", seeds, "")
	startAll(t, a, b)
	if got := voters(t, a.group); !slices.Equal(got, []string{"warren@a", "warren@b"}) {
		t.Fatalf("voters %v", got)
	}
}

func TestAWipedNodeIsRefusedUntilForgotten(t *testing.T) {
	w := newWorld(t)
	seeds := []string{"addr-warren@a", "addr-warren@b", "addr-warren@c"}
	a := w.start("warren@a", "ia", seeds, "")
	b := w.start("warren@b", "ib", seeds, "")
	c := w.start("warren@c", "ic", seeds, "")
	startAll(t, a, b, c)

	// c loses its disk and comes back under its name with a new incarnation.
	w.stop(c)
	c2 := w.start("warren@c", "ic-new", seeds, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := Node{Name: "warren@c", Address: "addr-warren@c", ID: "ic-new"}
	body, _ := json.Marshal(joinRequest{Node: req})
	// b may not know the new leader yet (c's stop can cost an election):
	// that answer (Unavailable) is asked again; any other but the refusal
	// fails.
	eventually.Succeeds(t, 10*time.Second, "a wiped node's join refused", func() error {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		_, err := c2.m.cfg.Network.Call(cctx, "warren@b", MethodJoin, body)
		switch status.Code(err) {
		case codes.AlreadyExists:
			return nil
		case codes.Unavailable, codes.DeadlineExceeded:
			return err
		}
		t.Fatalf("a wiped node's join answered %v, want AlreadyExists", err)
		return nil
	})
	if err := a.m.Forget(ctx, "warren@c"); err != nil {
		t.Fatalf("forget: %v", err)
	}
	if got := voters(t, a.group); !slices.Equal(got, []string{"warren@a", "warren@b"}) {
		t.Fatalf("voters after forget %v", got)
	}
	startAll(t, c2)
	eventually.Succeeds(t, 10*time.Second, "the cluster's voters", func() error {
		if got := voters(t, a.group); !slices.Equal(got, []string{"warren@a", "warren@b", "warren@c"}) {
			return errors.New("c not back")
		}
		return nil
	})
}

func TestLeave(t *testing.T) {
	w := newWorld(t)
	seeds := []string{"addr-warren@a", "addr-warren@b", "addr-warren@c"}
	a := w.start("warren@a", "ia", seeds, "")
	b := w.start("warren@b", "ib", seeds, "")
	c := w.start("warren@c", "ic", seeds, "")
	startAll(t, a, b, c)
	// The leader leaves: leadership moves first, so the group never stalls.
	leader := map[string]*member{"warren@a": a, "warren@b": b, "warren@c": c}[a.group.Leader()]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leader.m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	var rest *member
	for _, mb := range []*member{a, b, c} {
		if mb != leader {
			rest = mb
		}
	}
	eventually.Succeeds(t, 10*time.Second, "the cluster's voters", func() error {
		got := voters(t, rest.group)
		if len(got) != 2 || slices.Contains(got, leader.name) {
			return errors.New("still a member")
		}
		return nil
	})
	if _, ok := w.dir.Node(leader.name); ok {
		t.Fatal("the node that left is still in the directory")
	}
}

func TestAnnounceMovesAMemberAndOnlyItself(t *testing.T) {
	w := newWorld(t)
	a := w.start("warren@a", "ia", nil, "")
	b := w.start("warren@b", "ib", nil, "")
	var mu sync.Mutex
	got := map[string]string{}
	a.m.cfg.SetAddress = func(node, addr string) error {
		mu.Lock()
		defer mu.Unlock()
		got[node] = addr
		return nil
	}
	ctx := context.Background()
	own, _ := json.Marshal(Node{Name: "warren@b", Address: "10.0.0.9:25672"})
	if _, err := b.net.Call(ctx, "warren@a", MethodAnnounce, own); err != nil {
		t.Fatal(err)
	}
	other, _ := json.Marshal(Node{Name: "warren@c", Address: "10.6.6.6:25672"})
	if _, err := b.net.Call(ctx, "warren@a", MethodAnnounce, other); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("b announcing c's address: %v, want PermissionDenied", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got["warren@b"] != "10.0.0.9:25672" {
		t.Fatalf("addresses set: %v", got)
	}
}
