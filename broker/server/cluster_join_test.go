package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/meta"
)

// joinAPI asks n to join the cluster of the node at addr and returns the
// HTTP status and the error's reason text.
func joinAPI(t *testing.T, n *brokertest.Node, addr string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, n.HTTPURL()+"/api/cluster/join", strings.NewReader(fmt.Sprintf(`{"address":%q}`, addr)))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Reason string `json:"reason"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Reason
}

// A running node alone (defaults only) joins a two-node cluster through
// one member's cluster address, without a restart: every member lists it
// as a running voter, it has the cluster's definitions (its own defaults
// were wiped), a publish through it reaches a queue on another node, its
// open client connection was closed, and after a restart without any
// seed it is still a member with the cluster's definitions.
func TestJoinMakesALoneNodeAMemberWithoutARestart(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	ctx := context.Background()
	h, _ := meta.HashPassword("pw")
	if err := c.Nodes[0].Meta().PutUser(ctx, meta.User{Name: "alice", PasswordHash: h, HashingAlgorithm: "rabbit_password_hashing_sha256"}); err != nil {
		t.Fatal(err)
	}
	ch1 := c.Nodes[0].Channel(t)
	if _, err := ch1.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	lone := brokertest.Start(t, func(cfg *config.Config) { cfg.Cluster.NodeName = "warren@n3" })
	lone.Cfg.Cluster.Listen = lone.ClusterAddr().String()
	conn := lone.Dial(t)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))

	if code, reason := joinAPI(t, lone, c.Nodes[0].ClusterAddr().String()); code != http.StatusNoContent {
		t.Fatalf("join: %d %s", code, reason)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Error("the joining node's client connection is still open")
	}
	all := []string{"warren@n1", "warren@n2", "warren@n3"}
	for _, n := range append(slices.Clone(c.Nodes), lone) {
		eventually.Succeeds(t, 10*time.Second, "three running voters", func() error {
			if got := running(statusOf(t, n)); !slices.Equal(got, all) {
				return fmt.Errorf("%s sees running voters %v", n.Cfg.Cluster.NodeName, got)
			}
			return nil
		})
	}
	hasClusterDefs := func(n *brokertest.Node) error {
		if _, ok := n.Meta().User("alice"); !ok {
			return fmt.Errorf("%s has no user alice", n.Cfg.Cluster.NodeName)
		}
		qs := n.Meta().Queues("/")
		if i := slices.IndexFunc(qs, func(q meta.Queue) bool { return q.Name == "orders" }); i < 0 || qs[i].Node != "warren@n1" {
			return fmt.Errorf("%s: queues %+v, want orders on warren@n1", n.Cfg.Cluster.NodeName, qs)
		}
		return nil
	}
	eventually.Succeeds(t, 10*time.Second, "the cluster's definitions on the joined node", func() error { return hasClusterDefs(lone) })

	// A client of the joined node reaches the queue on n1.
	ch3 := lone.Channel(t)
	if err := ch3.Publish("", "orders", false, false, amqp091.Publishing{Body: []byte("via n3")}); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 10*time.Second, "the message through n3 is on n1", func() error {
		d, ok, err := ch1.Get("orders", true)
		if err != nil || !ok || string(d.Body) != "via n3" {
			return fmt.Errorf("get: %v %v %q", ok, err, d.Body)
		}
		return nil
	})

	// The membership survives a restart (no seeds: peers.json and the
	// group's state).
	lone.Stop()
	if len(lone.Cfg.Cluster.Seeds) != 0 {
		t.Fatal("the lone node had seeds")
	}
	peers, err := os.ReadFile(filepath.Join(lone.Cfg.DataDir, "raft", "peers.json"))
	if err != nil || !strings.Contains(string(peers), "warren@n1") {
		t.Errorf("peers.json: %q %v", peers, err)
	}
	again := brokertest.StartConfig(t, lone.Cfg)
	eventually.Succeeds(t, 10*time.Second, "still a member after a restart", func() error {
		if got := running(statusOf(t, again)); !slices.Equal(got, all) {
			return fmt.Errorf("sees running voters %v", got)
		}
		return hasClusterDefs(again)
	})
}

// Join refuses, before it wipes anything, a node that is not alone or
// holds definitions of its own, an address that is the node itself or
// where no node answers, and a name the cluster has as another member:
// the refused node stays a working cluster of its own with its defaults.
func TestJoinRefusesAndLeavesTheNodeAsItWas(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	target := c.Nodes[0].ClusterAddr().String()
	named := func(name string) *brokertest.Node {
		return brokertest.Start(t, func(cfg *config.Config) { cfg.Cluster.NodeName = name })
	}
	withQueue := named("warren@mine")
	if _, err := withQueue.Channel(t).QueueDeclare("mine", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	fresh := named("warren@fresh")
	for _, tc := range []struct {
		name   string
		node   *brokertest.Node
		addr   string
		code   int
		reason string
	}{
		{"its own definitions", withQueue, target, http.StatusBadRequest, "queue 'mine' in vhost '/'"},
		{"a member of a cluster", c.Nodes[1], fresh.ClusterAddr().String(), http.StatusBadRequest, "member of a cluster of 2"},
		{"itself", fresh, fresh.ClusterAddr().String(), http.StatusBadRequest, "is this node"},
		{"nobody answers", fresh, "127.0.0.1:27401", http.StatusServiceUnavailable, "no cluster node answers"},
		{"a member's name", named("warren@n2"), target, http.StatusBadRequest, "is a member with other data"},
		{"no address", fresh, "", http.StatusBadRequest, "address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			self := tc.node.Cfg.Cluster.NodeName
			before := running(statusOf(t, tc.node))
			code, reason := joinAPI(t, tc.node, tc.addr)
			if code != tc.code || !strings.Contains(reason, tc.reason) {
				t.Fatalf("join: %d %q, want %d with %q", code, reason, tc.code, tc.reason)
			}
			if got := running(statusOf(t, tc.node)); !slices.Equal(got, before) {
				t.Errorf("%s's members changed: %v, were %v", self, got, before)
			}
			// Still working, its defaults and definitions kept: guest
			// declares on it.
			ch := tc.node.Channel(t)
			probe := "after-" + strings.ReplaceAll(tc.name, " ", "-")
			if _, err := ch.QueueDeclare(probe, false, false, false, false, nil); err != nil {
				t.Fatalf("declare on %s after the refused join: %v", self, err)
			}
			if _, err := ch.QueueDelete(probe, false, false, false); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := withQueue.Channel(t).QueueDeclarePassive("mine", true, false, false, false, nil); err != nil {
		t.Errorf("the refused node lost its queue: %v", err)
	}
}

// While a node joins a cluster, a client of it is never told its
// credentials are wrong (the node's users are wiped before the cluster's
// arrive): it finds the listener closed and retries, and after the join
// it connects on the same address with a user of the cluster.
func TestJoiningNodeRefusesConnectionsNotCredentials(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	h, _ := meta.HashPassword("pw")
	if err := c.Nodes[0].Meta().PutUser(context.Background(), meta.User{Name: "alice", PasswordHash: h, HashingAlgorithm: "rabbit_password_hashing_sha256"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[0].Meta().PutPermission(context.Background(), meta.Permission{User: "alice", Vhost: "/", Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	lone := brokertest.Start(t, func(cfg *config.Config) { cfg.Cluster.NodeName = "warren@n3" })
	lone.Cfg.Cluster.Listen = lone.ClusterAddr().String()
	amqpAddr := lone.AMQPAddr()

	// A client dials the joining node over and over, as reconnecting
	// clients do, until the join ends.
	stop := make(chan struct{})
	refused := make(chan error, 1)
	go func() {
		defer close(refused)
		for {
			select {
			case <-stop:
				return
			default:
			}
			conn, err := amqp091.Dial("amqp://guest:guest@" + amqpAddr + "/")
			if err == nil {
				_ = conn.Close()
				continue
			}
			// (Not "403" anywhere in the text: a dial error names the
			// port, which may hold those digits.)
			var ae *amqp091.Error
			if errors.As(err, &ae) && ae.Code == amqp091.AccessRefused || strings.Contains(err.Error(), "Exception (403)") {
				refused <- err
				return
			}
		}
	}()
	code, reason := joinAPI(t, lone, c.Nodes[0].ClusterAddr().String())
	close(stop)
	if code != http.StatusNoContent {
		t.Fatalf("join: %d %s", code, reason)
	}
	if err := <-refused; err != nil {
		t.Errorf("a client of the joining node was refused its credentials: %v", err)
	}
	if got := lone.AMQPAddr(); got != amqpAddr {
		t.Errorf("the AMQP listener moved from %s to %s", amqpAddr, got)
	}
	eventually.Succeeds(t, 10*time.Second, "a user of the cluster connects to the joined node", func() error {
		conn, err := amqp091.Dial("amqp://alice:pw@" + amqpAddr + "/")
		if err != nil {
			return err
		}
		return conn.Close()
	})
}
