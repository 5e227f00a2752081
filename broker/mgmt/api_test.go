package mgmt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/server"
)

type api struct {
	t          *testing.T
	base       string
	user, pass string
}

func (a api) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if a.user != "" {
		req.SetBasicAuth(a.user, a.pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (a api) must(method, path string, body any, want int) []byte {
	a.t.Helper()
	code, data := a.do(method, path, body)
	if code != want {
		a.t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, data)
	}
	return data
}

func (a api) list(path string) []map[string]any {
	a.t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(a.must("GET", path, nil, 200), &out); err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	return out
}

func newAPI(t *testing.T, n *brokertest.Node) api {
	return api{t: t, base: n.HTTPURL(), user: "guest", pass: "guest"}
}

func TestAuthentication(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	tests := []struct {
		name, user, pass string
		want             int
	}{
		{"no credentials", "", "", 401},
		{"wrong password", "guest", "x", 401},
		{"unknown user", "nobody", "guest", 401},
		{"administrator", "guest", "guest", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.user, a.pass = tt.user, tt.pass
			if code, body := a.do("GET", "/api/overview", nil); code != tt.want {
				t.Fatalf("status %d, want %d: %s", code, tt.want, body)
			}
		})
	}
	// A user without management tags cannot use the API.
	a = newAPI(t, n)
	a.must("PUT", "/api/users/app", map[string]any{"password": "pw", "tags": ""}, 201)
	a.user, a.pass = "app", "pw"
	a.must("GET", "/api/overview", nil, 401)
}

func TestVhostUserPermissionLifecycleReachesAMQP(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/vhosts/orders", map[string]any{"description": "orders", "storage": map[string]any{"queue-version": 1, "stream-read-ahead": false}}, 201)
	a.must("PUT", "/api/users/alice", map[string]any{"password": "s3cret", "tags": "monitoring"}, 201)
	a.must("PUT", "/api/permissions/orders/alice", map[string]any{"configure": "^alice\\.", "write": ".*", "read": ".*"}, 201)
	var vh map[string]any
	_ = json.Unmarshal(a.must("GET", "/api/vhosts/orders", nil, 200), &vh)
	st, _ := vh["storage"].(map[string]any)
	if vh["description"] != "orders" || st["queue-version"] != float64(1) || st["stream-read-ahead"] != false {
		t.Fatalf("vhost = %v", vh)
	}
	conn, err := amqp091.Dial(strings.Replace(n.URLFor("alice", "s3cret", "orders"), "%2F", "", 1))
	if err != nil {
		t.Fatalf("alice cannot connect to the new vhost: %v", err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare("alice.work", true, false, false, false, nil); err != nil {
		t.Fatalf("declare allowed queue: %v", err)
	}
	if _, err := ch.QueueDeclare("bob.work", true, false, false, false, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("declare outside the configure pattern: %v, want 403", err)
	}
	qs := a.list("/api/queues/orders")
	if len(qs) != 1 || qs[0]["name"] != "alice.work" || qs[0]["vhost"] != "orders" {
		t.Fatalf("queues = %v", qs)
	}
	a.must("DELETE", "/api/vhosts/orders", nil, 204)
	a.must("GET", "/api/vhosts/orders", nil, 404)
	a.must("DELETE", "/api/users/alice", nil, 204)
}

func TestQueuesExchangesBindingsAndCounts(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/exchanges/%2F/events", map[string]any{"type": "topic", "durable": true}, 201)
	a.must("PUT", "/api/queues/%2F/audit", map[string]any{"durable": true, "arguments": map[string]any{"x-max-length": 1000}}, 201)
	a.must("POST", "/api/bindings/%2F/e/events/q/audit", map[string]any{"routing_key": "user.#"}, 201)
	ch := n.Channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "events", "user.created", false, false, amqp091.Publishing{Body: []byte("x")})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish: %v", err)
		}
	}
	if _, ok, _ := ch.Get("audit", false); !ok {
		t.Fatal("no message to get")
	}
	var q map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		_ = json.Unmarshal(a.must("GET", "/api/queues/%2F/audit", nil, 200), &q)
		if q["messages_ready"] == float64(4) && q["messages_unacknowledged"] == float64(1) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if q["messages"] != float64(5) || q["messages_ready"] != float64(4) || q["messages_unacknowledged"] != float64(1) {
		t.Fatalf("queue counts = %v %v %v, want 5 4 1", q["messages"], q["messages_ready"], q["messages_unacknowledged"])
	}
	found := false
	for _, b := range a.list("/api/bindings/%2F") {
		if b["source"] == "events" && b["destination"] == "audit" && b["routing_key"] == "user.#" {
			found = true
		}
	}
	if !found {
		t.Fatal("binding not listed")
	}
	a.must("DELETE", "/api/queues/%2F/audit/contents", nil, 204)
	_ = json.Unmarshal(a.must("GET", "/api/queues/%2F/audit", nil, 200), &q)
	if q["messages_ready"] != float64(0) {
		t.Fatalf("after purge messages_ready = %v", q["messages_ready"])
	}
	a.must("DELETE", "/api/queues/%2F/audit", nil, 204)
	a.must("GET", "/api/queues/%2F/audit", nil, 404)
	a.must("DELETE", "/api/exchanges/%2F/events", nil, 204)
}

func TestCloseConnectionByName(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	conn := n.Dial(t)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	var conns []map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for len(conns) == 0 && time.Now().Before(deadline) {
		conns = a.list("/api/connections")
	}
	if len(conns) != 1 || conns[0]["user"] != "guest" {
		t.Fatalf("connections = %v", conns)
	}
	a.must("DELETE", "/api/connections/"+url.PathEscape(conns[0]["name"].(string)), nil, 204)
	select {
	case e := <-closed:
		if e == nil || e.Code != 320 {
			t.Fatalf("closed with %v, want 320 CONNECTION_FORCED", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed")
	}
	a.must("DELETE", "/api/connections/nope", nil, 404)
}

func TestDefinitionsExportImport(t *testing.T) {
	src := brokertest.Start(t)
	a := newAPI(t, src)
	a.must("PUT", "/api/vhosts/billing", map[string]any{"storage": map[string]any{"queue-version": 1}}, 201)
	a.must("PUT", "/api/users/ops", map[string]any{"password": "ops-pw", "tags": []string{"administrator"}}, 201)
	a.must("PUT", "/api/permissions/billing/ops", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, 201)
	a.must("PUT", "/api/policies/billing/cap", map[string]any{"pattern": "^inv", "definition": map[string]any{"max-length": 10}, "apply-to": "queues"}, 201)
	a.must("PUT", "/api/exchanges/billing/inv", map[string]any{"type": "direct", "durable": true}, 201)
	a.must("PUT", "/api/queues/billing/invoices", map[string]any{"durable": true}, 201)
	a.must("POST", "/api/bindings/billing/e/inv/q/invoices", map[string]any{"routing_key": "new"}, 201)
	defs := a.must("GET", "/api/definitions", nil, 200)

	dst := brokertest.Start(t)
	b := newAPI(t, dst)
	var doc map[string]any
	_ = json.Unmarshal(defs, &doc)
	b.must("POST", "/api/definitions", doc, 204)
	b.user, b.pass = "ops", "ops-pw"
	b.must("GET", "/api/queues/billing/invoices", nil, 200)
	if len(b.list("/api/bindings/billing/e/inv/q/invoices")) != 1 {
		t.Fatal("binding not imported")
	}
	if len(b.list("/api/policies/billing")) != 1 {
		t.Fatal("policy not imported")
	}
}

func TestHealthAndMetrics(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	for _, p := range []string{"/api/health/checks/alarms", "/api/health/checks/local-alarms", "/api/health/checks/virtual-hosts", "/api/health/checks/ready", "/api/aliveness-test/%2F"} {
		a.must("GET", p, nil, 200)
	}
	a.user = ""
	a.must("GET", "/readyz", nil, 200)
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("metered", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		_ = ch.PublishWithContext(context.Background(), "", "metered", false, false, amqp091.Publishing{Body: []byte("m")})
	}
	time.Sleep(100 * time.Millisecond)
	resp, err := http.Get("http://" + n.Addr(server.ListenerPrometheus).String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`warren_queue_messages_ready{queue="metered",vhost="/"} 3`,
		"warren_messages_published_total 3",
		"warren_connections 1",
		"go_goroutines",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
