package mgmt_test

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
)

// publish is POST /api/exchanges/%2F/{exchange}/publish; it returns "routed".
func (a api) publish(exchange string, body map[string]any) bool {
	a.t.Helper()
	var out map[string]bool
	if err := json.Unmarshal(a.must("POST", "/api/exchanges/%2F/"+exchange+"/publish", body, 200), &out); err != nil {
		a.t.Fatalf("publish to %s: %v", exchange, err)
	}
	routed, ok := out["routed"]
	if !ok {
		a.t.Fatalf("publish to %s: no routed in %v", exchange, out)
	}
	return routed
}

func TestPublishMessage(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/exchanges/%2F/events", map[string]any{"type": "topic", "durable": true}, 201)
	a.must("PUT", "/api/queues/%2F/audit", map[string]any{"durable": true}, 201)
	a.must("POST", "/api/bindings/%2F/e/events/q/audit", map[string]any{"routing_key": "user.#"}, 201)
	a.must("PUT", "/api/queues/%2F/small", map[string]any{"durable": true, "arguments": map[string]any{"x-max-length": 1, "x-overflow": "reject-publish"}}, 201)

	props := map[string]any{"content_type": "text/plain", "delivery_mode": float64(2), "message_id": "m1",
		"priority": "3", "timestamp": float64(1795510800), "headers": map[string]any{"n": float64(7), "s": "x", "nested": map[string]any{"ok": true}}}
	if !a.publish("events", map[string]any{"routing_key": "user.created", "payload": "hi", "payload_encoding": "string", "properties": props}) {
		t.Fatal("a matching routing key was not routed")
	}
	if a.publish("events", map[string]any{"routing_key": "order.created", "payload": "lost", "payload_encoding": "string"}) {
		t.Fatal("a routing key no binding matches was routed")
	}

	// An AMQP consumer sees what was published over HTTP.
	ch := n.Channel(t)
	d, ok, err := ch.Get("audit", false)
	if err != nil || !ok {
		t.Fatalf("get: ok %v err %v", ok, err)
	}
	if string(d.Body) != "hi" || d.ContentType != "text/plain" || d.DeliveryMode != 2 || d.MessageId != "m1" || d.Priority != 3 ||
		d.Timestamp.Unix() != 1795510800 || d.Headers["n"] != int64(7) || d.Headers["s"] != "x" || d.Exchange != "events" || d.RoutingKey != "user.created" {
		t.Fatalf("delivery = %+v", d)
	}
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	a.waitReady("audit", 1)
	// ... and the API's get shows the same properties back.
	got := a.getMessages("audit", map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"})
	if len(got) != 1 {
		t.Fatalf("get = %v", got)
	}
	want := map[string]any{"content_type": "text/plain", "delivery_mode": float64(2), "message_id": "m1", "priority": float64(3),
		"timestamp": float64(1795510800), "headers": map[string]any{"n": float64(7), "s": "x", "nested": map[string]any{"ok": true}}}
	if !reflect.DeepEqual(got[0]["properties"], want) {
		t.Fatalf("properties = %v, want %v", got[0]["properties"], want)
	}

	// The default exchange is amq.default in the path; base64 payloads are decoded.
	raw := []byte{0, 1, 2, 0xff}
	if !a.publish("amq.default", map[string]any{"routing_key": "audit", "payload": base64.StdEncoding.EncodeToString(raw), "payload_encoding": "base64"}) {
		t.Fatal("default exchange publish not routed")
	}
	if d, ok, err := ch.Get("audit", true); err != nil || !ok || string(d.Body) != string(raw) || d.Exchange != "" {
		t.Fatalf("default exchange message: ok %v err %v body %v exchange %q", ok, err, d.Body, d.Exchange)
	}

	// A full queue that rejects publishes says so: not routed.
	msg := map[string]any{"routing_key": "small", "payload": "x", "payload_encoding": "string"}
	if !a.publish("amq.default", msg) {
		t.Fatal("first message into the small queue not routed")
	}
	if a.publish("amq.default", msg) {
		t.Fatal("a message the full queue refused was reported routed")
	}
	a.waitReady("small", 1)
}

func TestPublishMessageRefused(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/exchanges/%2F/hidden", map[string]any{"type": "fanout", "durable": true, "internal": true}, 201)
	a.must("PUT", "/api/queues/%2F/work", map[string]any{"durable": true}, 201)
	a.must("PUT", "/api/users/watcher", map[string]any{"password": "pw", "tags": "monitoring"}, 201)
	a.must("PUT", "/api/permissions/%2F/watcher", map[string]any{"configure": "", "write": "^other$", "read": ".*"}, 201)
	msg := func(extra map[string]any) map[string]any {
		m := map[string]any{"routing_key": "work", "payload": "x", "payload_encoding": "string"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []refusedPost{
		{"no payload", "guest", "/api/exchanges/%2F/amq.default/publish", map[string]any{"routing_key": "work", "payload_encoding": "string"}, 400},
		{"unknown payload encoding", "guest", "/api/exchanges/%2F/amq.default/publish", msg(map[string]any{"payload_encoding": "hex"}), 400},
		{"bad base64", "guest", "/api/exchanges/%2F/amq.default/publish", msg(map[string]any{"payload_encoding": "base64", "payload": "!!"}), 400},
		{"unknown property", "guest", "/api/exchanges/%2F/amq.default/publish", msg(map[string]any{"properties": map[string]any{"colour": "red"}}), 400},
		{"delivery mode not a number", "guest", "/api/exchanges/%2F/amq.default/publish", msg(map[string]any{"properties": map[string]any{"delivery_mode": "two"}}), 400},
		{"bad expiration", "guest", "/api/exchanges/%2F/amq.default/publish", msg(map[string]any{"properties": map[string]any{"expiration": "soon"}}), 400},
		{"someone else's user_id", "guest", "/api/exchanges/%2F/amq.default/publish", msg(map[string]any{"properties": map[string]any{"user_id": "root"}}), 400},
		{"unknown exchange", "guest", "/api/exchanges/%2F/nope/publish", msg(nil), 404},
		{"unknown vhost", "guest", "/api/exchanges/nope/amq.default/publish", msg(nil), 404},
		{"internal exchange", "guest", "/api/exchanges/%2F/hidden/publish", msg(nil), 401},
		{"no write permission", "watcher", "/api/exchanges/%2F/amq.default/publish", msg(nil), 401},
	}
	runRefused(t, n, tests)
	// None of those reached the queue.
	a.waitReady("work", 0)
}
