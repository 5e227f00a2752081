package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/clustertest"
	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/raftgroup"
)

// lostAnswerGroup is a member's group whose AddVoter of node commits and
// then fails, as when the answer to the join is lost (link cut, caller's
// timeout) after the leader added the node.
type lostAnswerGroup struct {
	*raftgroup.Group
	node string
}

func (g lostAnswerGroup) AddVoter(ctx context.Context, node string) error {
	if err := g.Group.AddVoter(ctx, node); err != nil || node != g.node {
		return err
	}
	return status.Error(codes.Unavailable, "answer lost after the commit")
}

// startLosing starts a member whose leader loses the answer to lose's join.
func (w *world) startLosing(name, id string, seeds []string, lose string) *member {
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
		Seeds: seeds, Network: net, Hello: w.hello, Group: lostAnswerGroup{g, lose}, Directory: w.dir,
		JoinMarker: w.marker(name), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryInterval: 50 * time.Millisecond,
	})
	w.mu.Lock()
	w.addrs["addr-"+name] = name
	w.mu.Unlock()
	w.t.Cleanup(func() { g.Close(); net.Close() })
	return &member{name: name, group: g, m: m, net: net}
}

// A join whose answer is lost after the cluster's leader added the node
// never makes the node a cluster of its own (two clusters would count
// it): warren ctl join says the outcome is unknown, the node stays empty,
// and once the leader reaches it, it is a member with the cluster's state.
// The same holds when the node is killed right then and restarts: its
// join marker makes it ask the cluster again instead of forming one.
func TestJoinWhoseAnswerIsLostNeverFormsASecondCluster(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool // kill -9 the node after the lost answer, start it again empty
	}{
		{name: "answer lost"},
		{name: "answer lost, node killed and restarted", restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			w := newWorld(t)
			seeds := []string{"addr-warren@a", "addr-warren@b"}
			a := w.startLosing("warren@a", "ia", seeds, "warren@d")
			b := w.startLosing("warren@b", "ib", seeds, "warren@d")
			startAll(t, a, b)
			d := w.start("warren@d", "id", nil, "")
			startAll(t, d)
			leader, err := a.group.WaitLeader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			via, lead := a, b
			if leader == "warren@a" {
				via, lead = b, a
			}
			eventually.True(t, 10*time.Second, "the other member knows the leader", func() bool { return via.group.Leader() == leader })
			// The leader cannot reach d (d reaches it through the other member).
			w.hub.Partition(leader, "warren@d")
			_, err = d.m.Join(ctx, "addr-"+via.name, func(ctx context.Context) error { return d.group.Reset(ctx, nil) })
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "unknown") {
				t.Fatalf("join whose answer is lost: %v, want Unavailable saying the outcome is unknown", err)
			}
			if _, err := os.Stat(w.marker("warren@d")); err != nil {
				t.Fatalf("the join marker after an unknown outcome: %v", err)
			}
			noFork := func() error {
				if got := voters(t, d.group); slices.Equal(got, []string{"warren@d"}) || d.group.Leader() == "warren@d" {
					return fmt.Errorf("d formed a cluster of its own: voters %v, leader %q", got, d.group.Leader())
				}
				return nil
			}
			eventually.Holds(t, time.Second, "d forms no cluster of its own", noFork)
			if tc.restart {
				w.stop(d)
				w.hub.Isolate("warren@d")              // nobody answers the restarted node at first
				d = w.start("warren@d", "id", nil, "") // empty: nothing reached it before the kill
				go func() { _ = d.m.Start(ctx) }()
				eventually.Holds(t, time.Second, "the restarted d stays empty while nobody answers it", func() error {
					if got := voters(t, d.group); len(got) > 0 || d.group.Leader() != "" {
						return fmt.Errorf("d: voters %v, leader %q", got, d.group.Leader())
					}
					return nil
				})
			}
			if got := voters(t, lead.group); !slices.Contains(got, "warren@d") {
				t.Fatalf("the leader's voters %v: the join was not committed (the test proves nothing)", got)
			}

			w.hub.Heal()
			want := []string{"warren@a", "warren@b", "warren@d"}
			eventually.Succeeds(t, 20*time.Second, "d is a member with the cluster's state", func() error {
				if got := voters(t, d.group); !slices.Equal(got, want) {
					return fmt.Errorf("d's voters %v", got)
				}
				if l := d.group.Leader(); l == "" || l == "warren@d" {
					return fmt.Errorf("d's leader %q", l)
				}
				if da, la := d.group.AppliedIndex(), lead.group.AppliedIndex(); da < la {
					return fmt.Errorf("d applied %d, the leader %d", da, la)
				}
				return nil
			})
			if !tc.restart {
				if !d.m.Settle(ctx) {
					t.Error("Settle of a node the cluster reached: false")
				}
			}
			{
				eventually.Succeeds(t, 10*time.Second, "the marker is gone once d is a member", func() error {
					if _, err := os.Stat(w.marker("warren@d")); !errors.Is(err, fs.ErrNotExist) {
						return fmt.Errorf("marker: %v", err)
					}
					return nil
				})
			}
		})
	}
}

// While a node is joining another cluster, a join through it is refused
// (its reset would wipe the configuration that adds the asking node), and
// it is accepted again once the node is a member.
func TestJoinThroughAJoiningNodeIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := newWorld(t)
	a := w.start("warren@a", "ia", nil, "")
	d := w.start("warren@d", "id", nil, "")
	startAll(t, a, d)
	req, _ := json.Marshal(joinRequest{Node: Node{Name: "warren@e", Address: "addr-warren@e", ID: "ie"}})
	var during error
	if _, err := d.m.Join(ctx, "addr-warren@a", func(ctx context.Context) error {
		_, during = a.net.Call(ctx, "warren@d", MethodJoin, req)
		return d.group.Reset(ctx, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if status.Code(during) != codes.Unavailable || !strings.Contains(during.Error(), "joining another cluster") {
		t.Fatalf("a join through a joining node: %v, want Unavailable (joining another cluster)", during)
	}
	if _, err := os.Stat(w.marker("warren@d")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the join marker after a join: %v, want none", err)
	}
}
