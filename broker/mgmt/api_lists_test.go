package mgmt_test

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// field reads a dotted path ("queue.name") out of decoded JSON.
func field(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestRabbitmqadminEndpoints calls, over real HTTP, each endpoint
// rabbitmqadmin v2 needs beyond the core objects and checks what it reads.
func TestRabbitmqadminEndpoints(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/queues/%2F/work", map[string]any{"durable": true}, 201)
	a.must("PUT", "/api/exchanges/%2F/events", map[string]any{"type": "topic", "durable": true}, 201)
	a.must("PUT", "/api/exchanges/%2F/fanin", map[string]any{"type": "fanout", "durable": true}, 201)
	a.must("POST", "/api/bindings/%2F/e/events/q/work", map[string]any{"routing_key": "order.*"}, 201)
	a.must("POST", "/api/bindings/%2F/e/fanin/e/events", map[string]any{"routing_key": ""}, 201)
	conn, ch := dialNamed(t, n, "worker-1")
	if err := ch.Qos(7, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("work", "ctag-1", false, false, false, false, amqp091.Table{"x-priority": int32(3)}); err != nil {
		t.Fatal(err)
	}
	local := conn.LocalAddr().(*net.TCPAddr)
	eventually.True(t, 5e9, "the consumer is listed", func() bool { return len(a.list("/api/consumers")) == 1 })

	tests := []struct {
		path string
		// check returns what differs from what a RabbitMQ client reads.
		check func(body any) string
	}{
		{"/api/consumers", func(b any) string {
			c := b.([]any)[0]
			return expectFields(c, map[string]any{
				"consumer_tag": "ctag-1", "ack_required": true, "exclusive": false, "prefetch_count": float64(7), "active": true,
				"queue.name": "work", "queue.vhost": "/", "arguments.x-priority": float64(3),
				"channel_details.connection_name": field(a.list("/api/connections")[0], "name"), "channel_details.number": float64(1),
				"channel_details.peer_host": local.IP.String(), "channel_details.peer_port": float64(local.Port),
				"channel_details.user": "guest", "channel_details.node": n.Cfg.Cluster.NodeName,
			})
		}},
		{"/api/consumers/%2F", func(b any) string { return expectLen(b, 1) }},
		{"/api/queues/%2F/work/bindings", func(b any) string {
			return expectLen(b, 2) + expectFields(b.([]any)[0], map[string]any{"source": "", "destination": "work", "routing_key": "work"}) +
				expectFields(b.([]any)[1], map[string]any{"source": "events", "destination": "work", "routing_key": "order.*", "destination_type": "queue"})
		}},
		{"/api/exchanges/%2F/events/bindings/source", func(b any) string {
			return expectLen(b, 1) + expectFields(b.([]any)[0], map[string]any{"source": "events", "destination": "work"})
		}},
		{"/api/exchanges/%2F/events/bindings/destination", func(b any) string {
			return expectLen(b, 1) + expectFields(b.([]any)[0], map[string]any{"source": "fanin", "destination": "events", "destination_type": "exchange"})
		}},
		{"/api/vhosts/%2F/permissions", func(b any) string {
			return expectLen(b, 1) + expectFields(b.([]any)[0], map[string]any{"user": "guest", "vhost": "/", "configure": ".*"})
		}},
		{"/api/vhosts/%2F/connections", func(b any) string {
			return expectLen(b, 1) + expectFields(b.([]any)[0], map[string]any{"client_properties.connection_name": "worker-1"})
		}},
		{"/api/connections/username/guest", func(b any) string { return expectLen(b, 1) }},
		{"/api/parameters", func(b any) string { return expectLen(b, 0) }},
		{"/api/parameters/federation-upstream/%2F", func(b any) string { return expectLen(b, 0) }},
		{"/api/global-parameters", func(b any) string {
			return expectFields(b.([]any)[0], map[string]any{"name": "cluster_name", "value": n.Cfg.Cluster.NodeName})
		}},
		{"/api/vhost-limits", func(b any) string { return expectLen(b, 0) }},
		{"/api/vhost-limits/%2F", func(b any) string { return expectLen(b, 0) }},
		{"/api/user-limits", func(b any) string { return expectLen(b, 0) }},
		{"/api/user-limits/guest", func(b any) string { return expectLen(b, 0) }},
		{"/api/feature-flags", func(b any) string {
			return expectFields(b.([]any)[0], map[string]any{"state": "enabled", "stability": "required"})
		}},
		{"/api/deprecated-features", func(b any) string { return expectLen(b, 0) }},
		{"/api/deprecated-features/used", func(b any) string { return expectLen(b, 0) }},
		{"/api/health/checks/protocol-listener/amqp091,stream", func(b any) string { return expectFields(b, map[string]any{"status": "ok"}) }},
		{"/api/health/checks/node-is-quorum-critical", func(b any) string { return expectFields(b, map[string]any{"status": "ok"}) }},
		{"/api/cluster-name", func(b any) string { return expectFields(b, map[string]any{"name": n.Cfg.Cluster.NodeName}) }},
		{"/api/whoami", func(b any) string {
			return expectFields(b, map[string]any{"name": "guest"}) + expectLen(field(b, "tags"), 1)
		}},
		{"/api/extensions", func(b any) string { return expectLen(b, 0) }},
		{"/api/operator-policies", func(b any) string { return expectLen(b, 0) }},
		{"/api/operator-policies/%2F", func(b any) string { return expectLen(b, 0) }},
		{"/api/nodes/" + n.Cfg.Cluster.NodeName + "/memory", func(b any) string {
			if rss, _ := field(b, "memory", "total", "rss").(float64); rss <= 0 {
				return fmt.Sprintf("memory.total.rss = %v, want > 0", rss)
			}
			return expectFields(b, map[string]any{"memory.strategy": "allocated", "memory.code": float64(0)})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			var body any
			if err := json.Unmarshal(a.must("GET", tt.path, nil, 200), &body); err != nil {
				t.Fatal(err)
			}
			if diff := tt.check(body); diff != "" {
				t.Errorf("GET %s: %s\n%v", tt.path, diff, body)
			}
		})
	}
	t.Run("what Warren does not have is refused saying so", func(t *testing.T) {
		for _, tt := range []struct {
			path   string
			delete int // none is set: nothing to delete, or nothing to clear
		}{
			{"/api/parameters/federation-upstream/%2F/up", 404}, {"/api/operator-policies/%2F/op", 404},
			{"/api/vhost-limits/%2F/max-connections", 204}, {"/api/user-limits/guest/max-channels", 204},
			{"/api/vhost-limits/nowhere/max-connections", 404}, {"/api/user-limits/nobody/max-channels", 404},
		} {
			code, body := a.do("PUT", tt.path, map[string]any{"value": 10, "pattern": "x", "definition": map[string]any{}})
			if code != 400 || !json.Valid(body) || !contains(string(body), "not supported by Warren") {
				t.Errorf("PUT %s: %d %s, want 400 saying it is not supported", tt.path, code, body)
			}
			a.must("DELETE", tt.path, nil, tt.delete)
		}
	})
	t.Run("closing a user's connections", func(t *testing.T) {
		closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
		a.must("DELETE", "/api/connections/username/guest", nil, 204)
		select {
		case e := <-closed:
			if e == nil || e.Code != 320 {
				t.Fatalf("closed with %v, want 320 CONNECTION_FORCED", e)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("guest's connection is still open")
		}
	})
	t.Run("a protocol without a listener fails the check", func(t *testing.T) {
		a.must("GET", "/api/health/checks/protocol-listener/mqtt", nil, 503)
	})
	t.Run("another user's connections and limits need monitoring", func(t *testing.T) {
		a.must("PUT", "/api/users/mgmt-only", map[string]any{"password": "pw", "tags": "management"}, 201)
		a.must("PUT", "/api/permissions/%2F/mgmt-only", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, 201)
		m := api{t: t, base: n.HTTPURL(), user: "mgmt-only", pass: "pw"}
		m.must("GET", "/api/connections/username/guest", nil, 401)
		m.must("GET", "/api/user-limits/guest", nil, 401)
		m.must("DELETE", "/api/connections/username/guest", nil, 401)
		if got := len(m.list("/api/consumers")); got != 0 {
			t.Fatalf("a management user sees %d consumers of guest's, want 0", got)
		}
		if got := len(m.list("/api/vhosts/%2F/connections")); got != 0 {
			t.Fatalf("a management user sees %d connections of guest's, want 0", got)
		}
	})
}

// TestPublishToTheDefaultExchange: rabbitmqadmin publishes to the default
// exchange at /api/exchanges/%2F//publish (an empty name); it must be
// routed, not redirected (a redirected POST comes back a GET: 405).
func TestPublishToTheDefaultExchange(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/queues/%2F/inbox", map[string]any{"durable": false}, 201)
	var out map[string]any
	_ = json.Unmarshal(a.must("POST", "/api/exchanges/%2F//publish", map[string]any{"routing_key": "inbox", "payload": "hi", "payload_encoding": "string", "properties": map[string]any{}}, 200), &out)
	if out["routed"] != true {
		t.Fatalf("publish to the default exchange: %v, want routed", out)
	}
	msgs := a.list2("POST", "/api/queues/%2F/inbox/get", map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"})
	if len(msgs) != 1 || msgs[0]["payload"] != "hi" {
		t.Fatalf("got %v, want the message published", msgs)
	}
}

func (a api) list2(method, path string, body any) []map[string]any {
	a.t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(a.must(method, path, body, 200), &out); err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return out
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func expectLen(v any, want int) string {
	l, ok := v.([]any)
	if !ok || len(l) != want {
		return fmt.Sprintf("want a list of %d; ", want)
	}
	return ""
}

// expectFields compares dotted fields of v with want.
func expectFields(v any, want map[string]any) string {
	var diff string
	for k, w := range want {
		path := splitDots(k)
		if got := field(v, path...); got != w {
			diff += fmt.Sprintf("%s = %v, want %v; ", k, got, w)
		}
	}
	return diff
}

// splitDots splits a field path at its dots, keeping "x-priority" whole.
func splitDots(k string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(k); i++ {
		if i == len(k) || k[i] == '.' {
			out = append(out, k[start:i])
			start = i + 1
		}
	}
	return out
}
