package mgmt_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
)

// getMessages is POST /api/queues/{vhost}/{queue}/get, decoded.
func (a api) getMessages(queue string, body map[string]any) []map[string]any {
	a.t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(a.must("POST", "/api/queues/%2F/"+queue+"/get", body, 200), &out); err != nil {
		a.t.Fatalf("get from %s: %v", queue, err)
	}
	return out
}

// waitReady polls the API until queue has want ready messages.
func (a api) waitReady(queue string, want int) {
	a.t.Helper()
	var q map[string]any
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_ = json.Unmarshal(a.must("GET", "/api/queues/%2F/"+queue, nil, 200), &q)
		if q["messages_ready"] == float64(want) && q["messages_unacknowledged"] == float64(0) {
			return
		}
	}
	a.t.Fatalf("queue %s: ready %v unacked %v, want %d and 0", queue, q["messages_ready"], q["messages_unacknowledged"], want)
}

func publishConfirmed(t *testing.T, ch *amqp091.Channel, queue string, msgs ...amqp091.Publishing) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false, m)
		if err != nil || !dc.Wait() {
			t.Fatalf("publish to %s: %v", queue, err)
		}
	}
}

func TestGetMessages(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/queues/%2F/dead", map[string]any{"durable": true}, 201)
	a.must("PUT", "/api/queues/%2F/inbox", map[string]any{"durable": true, "arguments": map[string]any{
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"}}, 201)
	ch := n.Channel(t)
	stamp := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	publishConfirmed(t, ch, "inbox",
		amqp091.Publishing{Body: []byte("one"), ContentType: "text/plain", DeliveryMode: 2, MessageId: "m1",
			Timestamp: stamp, Headers: amqp091.Table{"k": "v", "n": int32(7)}},
		amqp091.Publishing{Body: []byte{0xff, 0xfe}},
		amqp091.Publishing{Body: []byte("three")})

	// A requeueing get returns different messages, in order, and leaves them all in place.
	got := a.getMessages("inbox", map[string]any{"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto"})
	if len(got) != 2 {
		t.Fatalf("got %d messages, want 2: %v", len(got), got)
	}
	first, second := got[0], got[1]
	if first["payload"] != "one" || first["payload_encoding"] != "string" || first["payload_bytes"] != float64(3) ||
		first["redelivered"] != false || first["exchange"] != "" || first["routing_key"] != "inbox" || first["message_count"] != float64(2) {
		t.Errorf("first message = %v", first)
	}
	props, _ := first["properties"].(map[string]any)
	headers, _ := props["headers"].(map[string]any)
	if props["content_type"] != "text/plain" || props["delivery_mode"] != float64(2) || props["message_id"] != "m1" ||
		props["timestamp"] != float64(stamp.Unix()) || headers["k"] != "v" || headers["n"] != float64(7) {
		t.Errorf("first message's properties = %v", props)
	}
	if second["payload"] != base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe}) || second["payload_encoding"] != "base64" ||
		second["payload_bytes"] != float64(2) || len(second["properties"].(map[string]any)) != 0 {
		t.Errorf("binary message = %v", second)
	}
	a.waitReady("inbox", 3)

	// The management UI sends numbers as strings; requeued messages come back redelivered.
	got = a.getMessages("inbox", map[string]any{"count": "3", "ackmode": "reject_requeue_true", "encoding": "base64", "truncate": "2"})
	if len(got) != 3 {
		t.Fatalf("got %d messages, want 3", len(got))
	}
	for i, want := range []string{"on", "\xff\xfe", "th"} {
		if got[i]["payload"] != base64.StdEncoding.EncodeToString([]byte(want)) || got[i]["payload_encoding"] != "base64" {
			t.Errorf("message %d payload = %v (%v), want %q in base64", i, got[i]["payload"], got[i]["payload_encoding"], want)
		}
	}
	if got[0]["redelivered"] != true || got[2]["redelivered"] != false || got[2]["payload_bytes"] != float64(5) {
		t.Errorf("after a requeue: %v", got)
	}
	a.waitReady("inbox", 3)

	// Acking removes; rejecting without requeue dead-letters.
	if got = a.getMessages("inbox", map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}); len(got) != 1 || got[0]["payload"] != "one" {
		t.Fatalf("acking get = %v", got)
	}
	a.waitReady("inbox", 2)
	if got = a.getMessages("inbox", map[string]any{"count": 1, "ackmode": "reject_requeue_false", "encoding": "auto"}); len(got) != 1 || got[0]["payload_bytes"] != float64(2) {
		t.Fatalf("rejecting get = %v", got)
	}
	a.waitReady("inbox", 1)
	a.waitReady("dead", 1)
	if d, ok, err := ch.Get("dead", true); err != nil || !ok || string(d.Body) != "\xff\xfe" || d.Headers["x-death"] == nil {
		t.Fatalf("dead-lettered message: ok %v err %v body %q headers %v", ok, err, d.Body, d.Headers)
	}
	if got = a.getMessages("dead", map[string]any{"count": 5, "ackmode": "ack_requeue_false", "encoding": "auto"}); len(got) != 0 {
		t.Fatalf("get from an empty queue = %v, want []", got)
	}
}

// refusedPost is a POST the API must refuse with status want; user is
// "guest" (administrator) or "watcher" (password "pw", set up by the test).
type refusedPost struct {
	name, user, path string
	body             map[string]any
	want             int
}

func runRefused(t *testing.T, n *brokertest.Node, tests []refusedPost) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newAPI(t, n)
			if tt.user == "watcher" {
				b.user, b.pass = "watcher", "pw"
			}
			if code, body := b.do("POST", tt.path, tt.body); code != tt.want {
				t.Fatalf("status %d, want %d: %s", code, tt.want, body)
			}
		})
	}
}

func TestGetMessagesRefused(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/queues/%2F/work", map[string]any{"durable": true}, 201)
	a.must("PUT", "/api/queues/%2F/log", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "stream"}}, 201)
	a.must("PUT", "/api/users/watcher", map[string]any{"password": "pw", "tags": "monitoring"}, 201)
	a.must("PUT", "/api/permissions/%2F/watcher", map[string]any{"configure": "", "write": "", "read": "^other$"}, 201)
	publishConfirmed(t, n.Channel(t), "work", amqp091.Publishing{Body: []byte("keep")})
	owner := n.Channel(t)
	if _, err := owner.QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, owner, "mine", amqp091.Publishing{Body: []byte("private")})
	ok := map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}
	tests := []refusedPost{
		{"no count", "guest", "/api/queues/%2F/work/get", map[string]any{"ackmode": "ack_requeue_false", "encoding": "auto"}, 400},
		{"negative count", "guest", "/api/queues/%2F/work/get", map[string]any{"count": -1, "ackmode": "ack_requeue_false", "encoding": "auto"}, 400},
		{"unknown ackmode", "guest", "/api/queues/%2F/work/get", map[string]any{"count": 1, "ackmode": "ack", "encoding": "auto"}, 400},
		{"unknown encoding", "guest", "/api/queues/%2F/work/get", map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "hex"}, 400},
		{"unknown queue", "guest", "/api/queues/%2F/nope/get", ok, 404},
		{"unknown vhost", "guest", "/api/queues/nope/work/get", ok, 404},
		{"no read permission", "watcher", "/api/queues/%2F/work/get", ok, 401},
		{"stream queue", "guest", "/api/queues/%2F/log/get", ok, 400},
		{"another connection's exclusive queue", "guest", "/api/queues/%2F/mine/get", ok, 400},
	}
	runRefused(t, n, tests)
	// None of those took a message.
	a.waitReady("work", 1)
	a.waitReady("mine", 1)
}

// One get answers with at most 64 MiB of payload, whatever count asks
// for: a count of millions on a queue of large messages is an answer the
// node can hold, not one it runs out of memory building. What it leaves is
// still in the queue.
func TestGetMessagesIsBounded(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/queues/%2F/big", map[string]any{"durable": true}, 201)
	body := make([]byte, 20<<20)
	msgs := make([]amqp091.Publishing, 5)
	for i := range msgs {
		msgs[i] = amqp091.Publishing{Body: body, DeliveryMode: 2}
	}
	publishConfirmed(t, n.Channel(t), "big", msgs...)
	got := a.getMessages("big", map[string]any{"count": 2000000000, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 10})
	if len(got) != 4 {
		t.Fatalf("a get of 2e9 messages of 20 MiB answered %d, want 4 (stopping at 64 MiB of payload)", len(got))
	}
	a.waitReady("big", 5)
}
