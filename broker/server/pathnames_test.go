package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/meta"
)

// hostileNames are queue, stream and vhost names that were, or could
// become, something else than one directory of their own.
var hostileNames = []string{
	"..", ".", "/", "../..", "a/../..", "%2E%2E", "%", "%2F", "\x00", "..\x00", "queues", "msg_store", "streams",
	"Keep", "KEEP", "keep.converting", "keep.old", strings.Repeat(".", 255), strings.Repeat("Q", 255), strings.Repeat("é", 127),
}

// TestProbeQueueNamesStayInTheirDirectory publishes 100 persistent
// messages with confirms to durable queue keep (and 10 to stream
// keep-stream), then for each hostile name declares a durable queue and a
// stream of that name, publishes to them, deletes them and restarts the
// node: keep and keep-stream still have every message. Before names were
// escaped, deleting queue ".." removed the vhost's whole directory
// (message store included) and "." every queue's files.
func TestProbeQueueNamesStayInTheirDirectory(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(q string, i int) {
		t.Helper()
		body := fmt.Sprintf("%s-%d|", q, i)
		if i%10 == 9 {
			body += strings.Repeat("L", 5000) // to the message store
		}
		dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish to %q: %v", q, err)
		}
	}
	declare := func(ch *amqp091.Channel, q string, args amqp091.Table) {
		t.Helper()
		if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
			t.Fatalf("declare %q: %v", q, err)
		}
	}
	stream := amqp091.Table{"x-queue-type": "stream"}
	declare(ch, "keep", nil)
	declare(ch, "keep-stream", stream)
	for i := range 100 {
		publish("keep", i)
	}
	for i := range 10 {
		publish("keep-stream", i)
	}
	check := func(after string) {
		t.Helper()
		ch := n.Channel(t)
		q, err := ch.QueueDeclarePassive("keep", true, false, false, false, nil)
		if err != nil || q.Messages != 100 {
			t.Fatalf("after %s: keep has %d messages (%v), want 100", after, q.Messages, err)
		}
		if got := readStream(t, n, "/", "keep-stream", 10); len(got) != 10 {
			t.Fatalf("after %s: keep-stream has %d messages, want 10", after, len(got))
		}
	}
	for _, name := range hostileNames {
		for _, args := range []amqp091.Table{nil, stream} {
			ch = n.Channel(t)
			if err := ch.Confirm(false); err != nil {
				t.Fatal(err)
			}
			declare(ch, name, args)
			publish(name, 9)
			if _, err := ch.QueueDelete(name, false, false, false); err != nil {
				t.Fatalf("delete %q: %v", name, err)
			}
		}
		n = n.Restart()
		check(fmt.Sprintf("queue and stream %.20q were deleted and the node restarted", name))
	}
	// Vhosts: create, fill, delete, restart. (Through the metadata store:
	// the HTTP API's paths cannot carry "." or "..".)
	ctx := context.Background()
	for _, name := range []string{"..", ".", "vhosts", strings.Repeat("V", 255)} {
		if err := n.Meta().PutVhost(ctx, meta.Vhost{Name: name}); err != nil {
			t.Fatal(err)
		}
		if err := n.Meta().PutPermission(ctx, meta.Permission{User: "guest", Vhost: name, Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
			t.Fatal(err)
		}
		conn, err := amqp091.Dial(n.URLFor("guest", "guest", name))
		if err != nil {
			t.Fatalf("dial vhost %.20q: %v", name, err)
		}
		vch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		declare(vch, "..", nil)
		_ = conn.Close()
		if err := n.Meta().DeleteVhost(ctx, name); err != nil {
			t.Fatal(err)
		}
		n = n.Restart()
		check(fmt.Sprintf("vhost %.20q was deleted and the node restarted", name))
	}
}
