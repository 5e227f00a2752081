package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/mgmt"
)

func statusOf(t *testing.T, n *brokertest.Node) mgmt.ClusterStatus {
	t.Helper()
	var st mgmt.ClusterStatus
	if code := n.API(t, http.MethodGet, "/api/cluster/status", nil, &st); code != http.StatusOK {
		t.Fatalf("cluster status: %d", code)
	}
	return st
}

// running lists the members n reports running, sorted.
func running(st mgmt.ClusterStatus) []string {
	var out []string
	for _, m := range st.Nodes {
		if m.Running && m.Voter {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestThreeNodesFormOneClusterWithOneMetadata(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	all := []string{"warren@n1", "warren@n2", "warren@n3"}
	for _, n := range c.Nodes {
		eventually.Succeeds(t, 10*time.Second, "every member running", func() error {
			st := statusOf(t, n)
			if got := running(st); !slices.Equal(got, all) || st.MetadataLeader == "" {
				return fmt.Errorf("%s sees running %v, leader %q", n.Cfg.Cluster.NodeName, got, st.MetadataLeader)
			}
			return nil
		})
	}

	// A write on any node is read on every node: a user, a vhost, a durable
	// queue declared over AMQP.
	ctx := context.Background()
	h, _ := meta.HashPassword("pw")
	if err := c.Nodes[2].Meta().PutUser(ctx, meta.User{Name: "alice", PasswordHash: h, HashingAlgorithm: "rabbit_password_hashing_sha256"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[1].Meta().PutVhost(ctx, meta.Vhost{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	ch := c.Nodes[1].Channel(t)
	if _, err := ch.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Reads are local: each member has the writes once it applied them.
	for _, n := range c.Nodes {
		eventually.Succeeds(t, 5*time.Second, "the writes on every member", func() error {
			if _, ok := n.Meta().User("alice"); !ok {
				return fmt.Errorf("%s has no user alice", n.Cfg.Cluster.NodeName)
			}
			if _, ok := n.Vhost("shared"); !ok {
				return fmt.Errorf("%s runs no vhost shared", n.Cfg.Cluster.NodeName)
			}
			qs := n.Meta().Queues("/")
			if i := slices.IndexFunc(qs, func(q meta.Queue) bool { return q.Name == "orders" }); i < 0 || qs[i].Node != "warren@n2" {
				return fmt.Errorf("%s: queue orders %+v, want it placed on warren@n2", n.Cfg.Cluster.NodeName, qs)
			}
			return nil
		})
	}
	definitions := func(n *brokertest.Node) string {
		var d map[string]any
		n.API(t, http.MethodGet, "/api/definitions", nil, &d)
		delete(d, "rabbitmq_version")
		b, _ := json.Marshal(d)
		return string(b)
	}
	want := definitions(c.Nodes[0])
	for _, n := range c.Nodes[1:] {
		if got := definitions(n); got != want {
			t.Fatalf("definitions differ:\n%s\n%s", want, got)
		}
	}

	// /api/nodes lists every member, each as it reports itself.
	var nodes []map[string]any
	c.Nodes[0].API(t, http.MethodGet, "/api/nodes", nil, &nodes)
	var names []string
	for _, n := range nodes {
		if n["running"] == true && n["mem_limit"] != nil {
			names = append(names, n["name"].(string))
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, all) {
		t.Fatalf("/api/nodes lists running %v: %v", names, nodes)
	}
	if code := c.Nodes[0].API(t, http.MethodGet, "/api/health/checks/node-is-quorum-critical", nil, nil); code != http.StatusOK {
		t.Fatalf("quorum critical with every member up: %d", code)
	}
}

func TestClusterSurvivesTheLossOfALeader(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	ctx := context.Background()
	leader := statusOf(t, c.Nodes[0]).MetadataLeader
	li := slices.IndexFunc(c.Nodes, func(n *brokertest.Node) bool { return n.Cfg.Cluster.NodeName == leader })
	if li < 0 {
		t.Fatalf("no leader: %q", leader)
	}
	c.Stop(li)
	other := c.Nodes[(li+1)%3]
	// Stopping hands the leadership over: another member leads at once,
	// and writes go on.
	eventually.Succeeds(t, 10*time.Second, "a new leader", func() error {
		if l := statusOf(t, other).MetadataLeader; l == "" || l == leader {
			return fmt.Errorf("leader %q", l)
		}
		return nil
	})
	if err := other.Meta().PutVhost(ctx, meta.Vhost{Name: "after"}); err != nil {
		t.Fatal(err)
	}
	// The stopped member shows as not running; losing another would lose
	// the majority, so each remaining member is quorum critical.
	eventually.Succeeds(t, 10*time.Second, "the stopped member not running", func() error {
		if got := running(statusOf(t, other)); len(got) != 2 || slices.Contains(got, leader) {
			return fmt.Errorf("running %v", got)
		}
		return nil
	})
	if code := other.API(t, http.MethodGet, "/api/health/checks/node-is-quorum-critical", nil, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("quorum critical with two of three up: %d, want 503", code)
	}
	// Back, it catches up.
	back := c.Restart(li)
	if _, ok := back.Meta().Vhost("after"); !ok {
		t.Fatal("the restarted member did not catch up")
	}
}

func TestForgetAStoppedNode(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	c.Stop(2)
	if code := c.Nodes[0].API(t, http.MethodDelete, "/api/cluster/nodes/warren@n3", nil, nil); code != http.StatusNoContent {
		t.Fatalf("forget: %d", code)
	}
	// Reads are local: the other member sees the change once it applied it.
	eventually.Succeeds(t, 5*time.Second, "two members left", func() error {
		if st := statusOf(t, c.Nodes[1]); len(st.Nodes) != 2 {
			return fmt.Errorf("members after forget: %+v", st.Nodes)
		}
		return nil
	})
	if code := c.Nodes[0].API(t, http.MethodDelete, "/api/cluster/nodes/warren@n3", nil, nil); code != http.StatusNotFound {
		t.Fatalf("forgetting an unknown node: %d, want 404", code)
	}
	// With two members, a drain hands the leadership over and closes the
	// node's client listener.
	if code := c.Nodes[0].API(t, http.MethodPost, "/api/cluster/drain", nil, nil); code != http.StatusNoContent {
		t.Fatalf("drain: %d", code)
	}
	eventually.Succeeds(t, 5*time.Second, "n2 leads", func() error {
		if l := statusOf(t, c.Nodes[1]).MetadataLeader; l != "warren@n2" {
			return fmt.Errorf("leader after draining n1: %q", l)
		}
		return nil
	})
	eventually.Succeeds(t, 5*time.Second, "n2 sees n1 drained", func() error {
		for _, m := range statusOf(t, c.Nodes[1]).Nodes {
			if m.Name == "warren@n1" && !m.BeingDrained {
				return fmt.Errorf("n1: %+v", m)
			}
		}
		return nil
	})
	if _, err := amqp091.Dial(c.Nodes[0].URL()); err == nil {
		t.Fatal("a drained node still takes AMQP clients")
	}
}

// A member that comes back on another address (a pod's new IP) tells its
// peers at once: the leader reaches it and it catches up without waiting
// for its metadata entry, which needs that very leader.
func TestAMemberBackOnANewAddressRejoins(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	ctx := context.Background()
	c.Stop(2)
	if err := c.Nodes[0].Meta().PutVhost(ctx, meta.Vhost{Name: "while-away"}); err != nil {
		t.Fatal(err)
	}
	cfg := c.Nodes[2].Cfg
	cfg.Cluster.Listen = "127.0.0.1:0"
	start := time.Now()
	n3 := brokertest.StartConfig(t, cfg)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the member took %v to rejoin", took)
	}
	if _, ok := n3.Meta().Vhost("while-away"); !ok {
		t.Fatal("the member did not catch up")
	}
	eventually.Succeeds(t, 10*time.Second, "every member sees the new address", func() error {
		for _, n := range []*brokertest.Node{c.Nodes[0], c.Nodes[1], n3} {
			st := statusOf(t, n)
			for _, m := range st.Nodes {
				if m.Name == "warren@n3" && (m.Address != n3.ClusterAddr().String() || !m.Running) {
					return fmt.Errorf("%s sees n3 at %s running %v, it listens on %s", n.Cfg.Cluster.NodeName, m.Address, m.Running, n3.ClusterAddr())
				}
			}
		}
		return nil
	})
}

// Decommission takes a node out only when nothing would be lost: no queue
// lives on it, and the other members hold a majority without it.
func TestDecommissionRefusesToLoseQueuesOrTheMajority(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	ch := c.Nodes[2].Channel(t)
	if _, err := ch.QueueDeclare("on-n3", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if code := c.Nodes[2].API(t, http.MethodPost, "/api/cluster/decommission", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("decommission of a node holding a queue: %d, want 400", code)
	}
	if _, err := ch.QueueDelete("on-n3", false, false, false); err != nil {
		t.Fatal(err)
	}
	c.Stop(0)
	eventually.Succeeds(t, 10*time.Second, "n1 seen down", func() error {
		if got := running(statusOf(t, c.Nodes[2])); len(got) != 2 {
			return fmt.Errorf("running %v", got)
		}
		return nil
	})
	if code := c.Nodes[2].API(t, http.MethodPost, "/api/cluster/decommission", nil, nil); code != http.StatusBadRequest {
		t.Fatalf("decommission while another member is down: %d, want 400", code)
	}
	if st := statusOf(t, c.Nodes[1]); len(st.Nodes) != 3 {
		t.Fatalf("members after the refusals: %+v", st.Nodes)
	}
}
