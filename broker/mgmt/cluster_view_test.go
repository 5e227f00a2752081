package mgmt_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// clusterNodes are StartCluster's node names.
var clusterNodes = []string{"warren@n1", "warren@n2", "warren@n3"}

// waitMembers waits until every node of c reaches every other.
func waitMembers(t *testing.T, c *brokertest.Cluster) {
	t.Helper()
	for _, n := range c.Nodes {
		eventually.Succeeds(t, 15*time.Second, "every member running", func() error {
			var st struct {
				Nodes []struct {
					Name    string `json:"name"`
					Running bool   `json:"running"`
				} `json:"nodes"`
			}
			n.API(t, "GET", "/api/cluster/status", nil, &st)
			running := 0
			for _, m := range st.Nodes {
				if m.Running {
					running++
				}
			}
			if running != len(c.Nodes) {
				return fmt.Errorf("%s: %+v", n.Cfg.Cluster.NodeName, st.Nodes)
			}
			return nil
		})
	}
}

// getJSON reads path from a as a JSON value, or an error.
func getJSON(a api, path string, out any) error {
	code, data := a.do("GET", path, nil)
	if code != 200 {
		return fmt.Errorf("GET %s: %d %s", path, code, data)
	}
	return json.Unmarshal(data, out)
}

// byField indexes rows by a string field.
func byField(rows []map[string]any, key string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, r := range rows {
		s, _ := r[key].(string)
		out[s] = r
	}
	return out
}

// TestClusterWideLists: with a client on each of three nodes, every node's
// API lists every connection, channel, consumer and queue of the cluster,
// each with the node that holds it and that node's figures; the overview
// sums the members; a connection on another node is closed there; a
// stopped member's queues are listed from the metadata as down.
func TestClusterWideLists(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	waitMembers(t, c)

	// On node i (1-based): queue q<i> with i messages, and a consumer on
	// queue w<i>, over a connection to node i.
	connNode := map[float64]string{} // the client's port: its node
	conns := make([]*amqp091.Connection, 3)
	for i, n := range c.Nodes {
		conn := n.Dial(t)
		conns[i] = conn
		connNode[float64(conn.LocalAddr().(*net.TCPAddr).Port)] = clusterNodes[i]
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		q, w := fmt.Sprintf("q%d", i+1), fmt.Sprintf("w%d", i+1)
		for _, name := range []string{q, w} {
			if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
		}
		for range i + 1 {
			if err := ch.Publish("", q, false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ch.Consume(w, "c"+w, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}

	var connNames []string
	for _, n := range c.Nodes {
		a := newAPI(t, n)
		self := n.Cfg.Cluster.NodeName
		eventually.Succeeds(t, 10*time.Second, "every node lists the cluster's objects", func() error {
			var rows []map[string]any
			if err := getJSON(a, "/api/connections", &rows); err != nil {
				return err
			}
			if len(rows) != 3 {
				return fmt.Errorf("%s lists %d connections: %v", self, len(rows), rows)
			}
			connNames = connNames[:0]
			for _, r := range rows {
				if want := connNode[r["peer_port"].(float64)]; r["node"] != want {
					return fmt.Errorf("%s: connection %v on node %v, want %s", self, r["name"], r["node"], want)
				}
				connNames = append(connNames, r["name"].(string))
			}
			if !slices.IsSorted(connNames) {
				return fmt.Errorf("%s: connections not sorted by name: %v", self, connNames)
			}
			if err := getJSON(a, "/api/channels", &rows); err != nil {
				return err
			}
			if got := nodesOf(rows, "node"); !slices.Equal(got, clusterNodes) {
				return fmt.Errorf("%s: channels on %v", self, got)
			}
			if err := getJSON(a, "/api/consumers", &rows); err != nil {
				return err
			}
			if len(rows) != 3 {
				return fmt.Errorf("%s lists %d consumers", self, len(rows))
			}
			for i, r := range rows {
				cd, _ := r["channel_details"].(map[string]any)
				if q, _ := r["queue"].(map[string]any); q["name"] != fmt.Sprintf("w%d", i+1) || cd["node"] != clusterNodes[i] {
					return fmt.Errorf("%s: consumer %d = %v", self, i, r)
				}
			}
			if err := getJSON(a, "/api/queues", &rows); err != nil {
				return err
			}
			qs := byField(rows, "name")
			if len(rows) != 6 {
				return fmt.Errorf("%s lists %d queues", self, len(rows))
			}
			for i := range 3 {
				for _, path := range []string{"", "/api/queues/%2F/" + fmt.Sprintf("q%d", i+1)} {
					q := qs[fmt.Sprintf("q%d", i+1)]
					if path != "" {
						if err := getJSON(a, path, &q); err != nil {
							return err
						}
					}
					if q["node"] != clusterNodes[i] || q["messages"] != float64(i+1) || q["state"] != "running" {
						return fmt.Errorf("%s: queue q%d (%q) = node %v, %v messages, state %v", self, i+1, path, q["node"], q["messages"], q["state"])
					}
				}
				if w := qs[fmt.Sprintf("w%d", i+1)]; w["consumers"] != float64(1) || w["node"] != clusterNodes[i] {
					return fmt.Errorf("%s: queue w%d = %v", self, i+1, w)
				}
			}
			var ov struct {
				Node         string             `json:"node"`
				ClusterName  string             `json:"cluster_name"`
				ObjectTotals map[string]float64 `json:"object_totals"`
				QueueTotals  map[string]float64 `json:"queue_totals"`
				MessageStats map[string]any     `json:"message_stats"`
				Listeners    []map[string]any   `json:"listeners"`
			}
			if err := getJSON(a, "/api/overview", &ov); err != nil {
				return err
			}
			want := map[string]float64{"connections": 3, "channels": 3, "queues": 6, "consumers": 3}
			for k, v := range want {
				if ov.ObjectTotals[k] != v {
					return fmt.Errorf("%s: overview object_totals %v, want %v", self, ov.ObjectTotals, want)
				}
			}
			if ov.QueueTotals["messages"] != 6 || ov.QueueTotals["messages_ready"] != 6 {
				return fmt.Errorf("%s: overview queue_totals %v, want 6 messages ready", self, ov.QueueTotals)
			}
			if ov.MessageStats["publish"] != float64(6) {
				return fmt.Errorf("%s: overview message_stats.publish %v, want 6", self, ov.MessageStats["publish"])
			}
			if ov.Node != self || ov.ClusterName != "warren@n1" || !slices.Equal(nodesOf(ov.Listeners, "node"), clusterNodes) {
				return fmt.Errorf("%s: overview node %q, cluster_name %q, listeners on %v", self, ov.Node, ov.ClusterName, nodesOf(ov.Listeners, "node"))
			}
			return nil
		})
	}

	// Node 1's API closes the connection on node 3, there.
	a := newAPI(t, c.Nodes[0])
	closed := conns[2].NotifyClose(make(chan *amqp091.Error, 1))
	var third string
	for _, r := range a.list("/api/connections") {
		if r["node"] == clusterNodes[2] {
			third = r["name"].(string)
		}
	}
	a.must("DELETE", "/api/connections/"+url.PathEscape(third), nil, 204)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection on node 3 did not close")
	}
	eventually.True(t, 5*time.Second, "the closed connection is no longer listed", func() bool {
		return !slices.Contains(names(a.list("/api/connections"), "name"), "//"+third)
	})
	a.must("DELETE", "/api/connections/"+url.PathEscape(third), nil, 404)

	// Node 3 stops: node 1 lists its queues from the metadata, down.
	c.Stop(2)
	eventually.Succeeds(t, 15*time.Second, "node 3's queues listed down", func() error {
		var rows []map[string]any
		if err := getJSON(a, "/api/queues", &rows); err != nil {
			return err
		}
		qs := byField(rows, "name")
		if len(rows) != 6 || qs["q1"]["state"] != "running" {
			return fmt.Errorf("queues %v", rows)
		}
		for _, name := range []string{"q3", "w3"} {
			if q := qs[name]; q["state"] != "down" || q["node"] != clusterNodes[2] || q["durable"] != true {
				return fmt.Errorf("queue %s = %v", name, q)
			}
		}
		var q map[string]any
		if err := getJSON(a, "/api/queues/%2F/q3", &q); err != nil {
			return err
		}
		if q["state"] != "down" {
			return fmt.Errorf("GET q3 = %v", q)
		}
		var ov struct {
			ObjectTotals map[string]float64 `json:"object_totals"`
		}
		if err := getJSON(a, "/api/overview", &ov); err != nil {
			return err
		}
		if ov.ObjectTotals["queues"] != 6 || ov.ObjectTotals["connections"] != 2 {
			return fmt.Errorf("overview object_totals %v, want 6 queues (2 down), 2 connections", ov.ObjectTotals)
		}
		return nil
	})
}

// nodesOf is the sorted distinct values of key in rows.
func nodesOf(rows []map[string]any, key string) []string {
	var out []string
	for _, r := range rows {
		if s, _ := r[key].(string); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// TestClusterListsKeepTheAuthorizationCut: asked on a node where none of
// them is connected, a management user sees only its own connections,
// channels and consumers on other nodes and only its vhosts' queues; a
// monitoring user every connection; another user's connection on another
// node is not the management user's to read or close.
func TestClusterListsKeepTheAuthorizationCut(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	waitMembers(t, c)
	admin := newAPI(t, c.Nodes[0])
	admin.must("PUT", "/api/vhosts/a", map[string]any{}, 201)
	for _, u := range []string{"mgr", "mon"} {
		tag := map[string]string{"mgr": "management", "mon": "monitoring"}[u]
		admin.must("PUT", "/api/users/"+u, map[string]any{"password": "pw", "tags": tag}, 201)
		admin.must("PUT", "/api/permissions/a/"+u, map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, 201)
	}
	// mgr on node 2 in vhost a (queue qa held there), guest on node 3 in /
	// (queue qroot held there), each with a consumer.
	dial := func(n *brokertest.Node, user, pass, vh, q string) *amqp091.Connection {
		var conn *amqp091.Connection
		eventually.Succeeds(t, 10*time.Second, user+" connects to "+n.Cfg.Cluster.NodeName, func() (err error) {
			conn, err = amqp091.Dial(n.URLFor(user, pass, vh))
			return err
		})
		t.Cleanup(func() { conn.Close() })
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := ch.Consume(q, "", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	dial(c.Nodes[1], "mgr", "pw", "a", "qa")
	guest := dial(c.Nodes[2], "guest", "guest", "/", "qroot")

	ask := func(user string) api {
		a := api{t: t, base: c.Nodes[0].HTTPURL(), user: user, pass: "pw"}
		if user == "guest" {
			a.pass = "guest"
		}
		return a
	}
	eventually.True(t, 10*time.Second, "node 1 lists both connections", func() bool {
		return len(admin.list("/api/connections")) == 2 && len(admin.list("/api/consumers")) == 2
	})
	n2, n3 := clusterNodes[1], clusterNodes[2]
	tests := []struct {
		user, path, key string
		want            []string // vhost/key@node
	}{
		{"mgr", "/api/connections", "user", []string{"a/mgr@" + n2}},
		{"mon", "/api/connections", "user", []string{"//guest@" + n3, "a/mgr@" + n2}},
		{"guest", "/api/connections", "user", []string{"//guest@" + n3, "a/mgr@" + n2}},
		{"mgr", "/api/vhosts/a/connections", "user", []string{"a/mgr@" + n2}},
		{"mgr", "/api/connections/username/mgr", "user", []string{"a/mgr@" + n2}},
		{"mgr", "/api/channels", "user", []string{"a/mgr@" + n2}},
		{"mon", "/api/channels", "user", []string{"//guest@" + n3, "a/mgr@" + n2}},
		{"mgr", "/api/consumers", "queue", []string{"a/qa@" + n2}},
		{"mgr", "/api/consumers/a", "queue", []string{"a/qa@" + n2}},
		{"mon", "/api/consumers", "queue", []string{"a/qa@" + n2}},
		{"guest", "/api/consumers", "queue", []string{"//qroot@" + n3, "a/qa@" + n2}},
		{"mgr", "/api/queues", "name", []string{"a/qa@" + n2}},
		{"mgr", "/api/queues/a", "name", []string{"a/qa@" + n2}},
		{"mon", "/api/queues", "name", []string{"a/qa@" + n2}},
		{"guest", "/api/queues", "name", []string{"//qroot@" + n3, "a/qa@" + n2}},
	}
	for _, tt := range tests {
		t.Run(tt.user+tt.path, func(t *testing.T) {
			var got []string
			for _, r := range ask(tt.user).list(tt.path) {
				vh, node := r["vhost"], r["node"]
				if ch, ok := r["channel_details"].(map[string]any); ok { // a consumer
					node, vh = ch["node"], r["queue"].(map[string]any)["vhost"]
				}
				v := r[tt.key]
				if q, ok := v.(map[string]any); ok {
					v = q["name"]
				}
				got = append(got, fmt.Sprintf("%v/%v@%v", vh, v, node))
			}
			slices.Sort(got)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("%s as %s on node 1 = %v, want %v", tt.path, tt.user, got, tt.want)
			}
		})
	}

	// The overview counts what each sees, across the nodes.
	for _, tt := range []struct {
		user                            string
		conns, chans, queues, consumers float64
	}{
		{"mgr", 1, 1, 1, 1},
		{"mon", 2, 2, 2, 2},
		{"guest", 2, 2, 2, 2},
	} {
		var ov struct {
			ObjectTotals map[string]float64 `json:"object_totals"`
		}
		if err := getJSON(ask(tt.user), "/api/overview", &ov); err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{"connections": tt.conns, "channels": tt.chans, "queues": tt.queues, "consumers": tt.consumers}
		for k, v := range want {
			if ov.ObjectTotals[k] != v {
				t.Errorf("%s's overview object_totals = %v, want %v", tt.user, ov.ObjectTotals, want)
				break
			}
		}
	}

	// guest's connection on node 3: not mgr's to see or close from node 1.
	var guestConn string
	for _, r := range admin.list("/api/connections") {
		if r["user"] == "guest" {
			guestConn = r["name"].(string)
		}
	}
	mgr := ask("mgr")
	mgr.must("GET", "/api/connections/"+url.PathEscape(guestConn), nil, 401)
	mgr.must("DELETE", "/api/connections/"+url.PathEscape(guestConn), nil, 401)
	mgr.must("GET", "/api/connections/username/guest", nil, 401)
	mgr.must("DELETE", "/api/connections/username/guest", nil, 401)
	admin.must("GET", "/api/connections/"+url.PathEscape(guestConn), nil, 200)
	if got := len(admin.list("/api/connections/username/guest")); got != 1 {
		t.Fatalf("guest's connections listed from node 1: %d, want 1", got)
	}
	// An administrator closes them from node 1: node 3 closes them.
	closed := guest.NotifyClose(make(chan *amqp091.Error, 1))
	admin.must("DELETE", "/api/connections/username/guest", nil, 204)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("guest's connection on node 3 did not close")
	}
	eventually.True(t, 5*time.Second, "only mgr's connection is left", func() bool {
		return strings.Join(names(admin.list("/api/connections"), "user"), ",") == "a/mgr"
	})
}
