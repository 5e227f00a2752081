package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/brokertest"
)

const replyTo = "amq.rabbitmq.reply-to"

// channelErr waits for ch's close and returns its error.
func channelErr(t *testing.T, closed chan *amqp091.Error) *amqp091.Error {
	t.Helper()
	select {
	case e := <-closed:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("the channel was not closed")
		return nil
	}
}

// publishConfirmedReturn publishes one message in confirm mode and returns
// whether it was confirmed and the basic.return it got, if any.
func publishConfirmedReturn(t *testing.T, ch *amqp091.Channel, key string, mandatory bool, p amqp091.Publishing) (bool, *amqp091.Return) {
	t.Helper()
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", key, mandatory, false, p)
	if err != nil {
		t.Fatalf("publish to %q: %v", key, err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		t.Fatalf("confirm: %v", err)
	}
	// A return precedes its confirm on the wire, but amqp091-go hands
	// them over on separate goroutines.
	select {
	case r := <-returns:
		return ok, &r
	case <-time.After(200 * time.Millisecond):
		return ok, nil
	}
}

// TestDirectReplyToRPC is an RPC round trip as RabbitMQ's tutorial does it:
// the client consumes from amq.rabbitmq.reply-to (no-ack), publishes a
// request with that reply_to, and a server on another connection replies
// to the name it finds in reply_to. The replies come with the client's
// consumer tag, beyond its prefetch, with their properties.
func TestDirectReplyToRPC(t *testing.T) {
	n := brokertest.Start(t)
	client := n.Channel(t)
	server := n.Channel(t)
	declare(t, server, "rpc", false, nil)
	if err := client.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	replies, err := client.Consume(replyTo, "rpc-client", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume from %s: %v", replyTo, err)
	}
	const requests = 5
	for i := range requests {
		err := client.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: replyTo, CorrelationId: fmt.Sprint(i), Body: []byte(fmt.Sprint(i * i))})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := server.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var replyName string
	for i, d := range consumeN(t, server, "rpc", requests, false) {
		if !strings.HasPrefix(d.ReplyTo, replyTo+".") || len(d.ReplyTo) < len(replyTo)+20 {
			t.Fatalf("request %d has reply_to %q, want the channel's reply name", i, d.ReplyTo)
		}
		if replyName != "" && d.ReplyTo != replyName {
			t.Fatalf("requests of one channel name two reply queues: %q and %q", replyName, d.ReplyTo)
		}
		replyName = d.ReplyTo
		ok, ret := publishConfirmedReturn(t, server, d.ReplyTo, true, amqp091.Publishing{CorrelationId: d.CorrelationId, ContentType: "text/plain", Body: append([]byte("reply to "), d.Body...)})
		if !ok || ret != nil {
			t.Fatalf("reply %d: confirmed %v, returned %+v", i, ok, ret)
		}
	}
	for i := range requests {
		select {
		case d := <-replies:
			want := fmt.Sprintf("reply to %d", i*i)
			if d.ConsumerTag != "rpc-client" || d.CorrelationId != fmt.Sprint(i) || string(d.Body) != want || d.ContentType != "text/plain" || d.Exchange != "" || d.RoutingKey != replyName || d.Redelivered {
				t.Fatalf("reply %d: %+v, want %q with correlation id %d, consumer tag rpc-client, routing key %s", i, d, want, i, replyName)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d of %d replies (prefetch 1 must not hold them back)", i, requests)
		}
	}

	// Both names declare passively, as queues with one consumer.
	for _, name := range []string{replyTo, replyName} {
		q, err := server.QueueDeclarePassive(name, false, false, false, false, nil)
		if err != nil {
			t.Fatalf("passive declare %q: %v", name, err)
		}
		if q.Name != name || q.Consumers != 1 || q.Messages != 0 {
			t.Fatalf("passive declare %q: %+v", name, q)
		}
	}
}

// TestDirectReplyToRefusals checks RabbitMQ's channel errors around
// direct reply-to.
func TestDirectReplyToRefusals(t *testing.T) {
	n := brokertest.Start(t)
	tests := []struct {
		name string
		do   func(ch *amqp091.Channel) error
		code int
		text string
	}{
		{"consume with acks", func(ch *amqp091.Channel) error {
			_, err := ch.Consume(replyTo, "", false, false, false, false, nil)
			return err
		}, amqp091.PreconditionFailed, "PRECONDITION_FAILED - reply consumer cannot acknowledge"},
		{"a second consumer", func(ch *amqp091.Channel) error {
			if _, err := ch.Consume(replyTo, "", true, false, false, false, nil); err != nil {
				return err
			}
			_, err := ch.Consume(replyTo, "", true, false, false, false, nil)
			return err
		}, amqp091.PreconditionFailed, "PRECONDITION_FAILED - reply consumer already set"},
		{"publish without the consumer", func(ch *amqp091.Channel) error {
			if err := ch.Publish("", "anything", false, false, amqp091.Publishing{ReplyTo: replyTo}); err != nil {
				return err
			}
			_, err := ch.QueueDeclare("", false, true, true, false, nil) // a round trip to see the close
			return err
		}, amqp091.PreconditionFailed, "PRECONDITION_FAILED - fast reply consumer does not exist"},
		{"passive declare of an unknown reply name", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive(replyTo+".AAAAAAA.bm90LWEtcmVhbC1rZXk", false, false, false, false, nil)
			return err
		}, amqp091.NotFound, "NOT_FOUND - no queue 'amq.rabbitmq.reply-to.AAAAAAA.bm90LWEtcmVhbC1rZXk' in vhost '/'"},
		{"bind a reply name", func(ch *amqp091.Channel) error {
			return ch.QueueBind(replyTo+".x.y", "k", "amq.direct", false, nil)
		}, amqp091.AccessRefused, "ACCESS_REFUSED - cannot bind or unbind to a volatile (direct reply-to) queue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := n.Channel(t)
			closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
			_ = tt.do(ch)
			e := channelErr(t, closed)
			if e == nil || e.Code != tt.code || e.Reason != tt.text {
				t.Fatalf("channel closed with %+v, want %d %q", e, tt.code, tt.text)
			}
		})
	}
}

// TestDirectReplyToClosedChannel checks that a reply to a channel that is
// gone is dropped: confirmed, returned if mandatory, never delivered to a
// later channel; its name no longer declares.
func TestDirectReplyToClosedChannel(t *testing.T) {
	n := brokertest.Start(t)
	conn := n.Dial(t)
	client, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	server := n.Channel(t)
	declare(t, server, "rpc", false, nil)
	if _, err := client.Consume(replyTo, "", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := client.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: replyTo, Body: []byte("req")}); err != nil {
		t.Fatal(err)
	}
	name := consumeN(t, server, "rpc", 1, false)[0].ReplyTo
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	// A new channel on the same connection consumes replies under a
	// new name: the old name reaches nobody.
	again, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	replies, err := again.Consume(replyTo, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, mandatory := range []bool{false, true} {
		ok, ret := publishConfirmedReturn(t, server, name, mandatory, amqp091.Publishing{Body: []byte("late reply")})
		if !ok {
			t.Fatalf("mandatory=%v: reply to a closed channel nacked", mandatory)
		}
		if mandatory != (ret != nil) || ret != nil && (ret.ReplyCode != amqp091.NoRoute || ret.RoutingKey != name) {
			t.Fatalf("mandatory=%v: returned %+v", mandatory, ret)
		}
	}
	select {
	case d := <-replies:
		t.Fatalf("a reply to a closed channel reached another one: %q", d.Body)
	case <-time.After(200 * time.Millisecond):
	}
	_, err = server.QueueDeclarePassive(name, false, false, false, false, nil)
	var e *amqp091.Error
	if !errors.As(err, &e) || e.Code != amqp091.NotFound {
		t.Fatalf("passive declare of a closed channel's reply name: %v, want 404", err)
	}
}

// TestProbeReplyConsumerThatNeverReads: replies go to a direct reply-to
// consumer beyond any prefetch, so a requester that never reads its socket
// must not make the broker hold what it is sent: past
// amqp.output_buffer_limit the replies are dropped (as RabbitMQ drops
// replies its consumer has no credit for), the responder's publishes are
// still confirmed, and the broker's heap stays bounded.
func TestProbeReplyConsumerThatNeverReads(t *testing.T) {
	const bound = 64 << 20
	n := brokertest.Start(t)
	server := n.Channel(t)
	declare(t, server, "rpc", false, nil)
	base := liveHeap()

	nc, _ := rawClient(t, n.AMQPAddr(), 0)
	props := (&wire.Properties{ReplyTo: replyTo}).Append(nil)
	b := wire.AppendMethodFrame(nil, 1, &wire.BasicConsume{Queue: replyTo, NoAck: true})
	b = wire.AppendMethodFrame(b, 1, &wire.BasicPublish{RoutingKey: "rpc"})
	b = wire.AppendHeaderFrame(b, 1, wire.ClassBasic, 3, props)
	b = wire.AppendBodyFrames(b, 1, []byte("req"), 131072)
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	name := consumeN(t, server, "rpc", 1, false)[0].ReplyTo
	if !strings.HasPrefix(name, replyTo+".") {
		t.Fatalf("request's reply_to %q", name)
	}

	// 300 MB of replies to a client that reads none of them.
	reply := make([]byte, 1<<20)
	bodies := make([]string, 300)
	for i := range bodies {
		bodies[i] = string(reply)
	}
	publishConfirmed(t, server, "", name, bodies, false)
	if grown := liveHeap() - base; grown > bound {
		t.Fatalf("broker heap grew by %d MB for replies its consumer does not read (bound %d MB)", grown>>20, bound>>20)
	}
}

// TestDirectReplyToOtherVhost: a reply name reaches its channel from its
// own vhost only; from another it is an unknown queue.
func TestDirectReplyToOtherVhost(t *testing.T) {
	n := brokertest.Start(t)
	if code := n.API(t, "PUT", "/api/vhosts/other", map[string]any{}, nil); code/100 != 2 {
		t.Fatalf("create vhost: %d", code)
	}
	if code := n.API(t, "PUT", "/api/permissions/other/guest", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, nil); code/100 != 2 {
		t.Fatalf("set permissions: %d", code)
	}
	client := n.Channel(t)
	replies, err := client.Consume(replyTo, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	server := n.Channel(t)
	declare(t, server, "rpc", false, nil)
	if err := client.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: replyTo, Body: []byte("req")}); err != nil {
		t.Fatal(err)
	}
	name := consumeN(t, server, "rpc", 1, false)[0].ReplyTo

	conn, err := amqp091.Dial(n.URLFor("guest", "guest", "other"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	other, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ok, ret := publishConfirmedReturn(t, other, name, true, amqp091.Publishing{Body: []byte("from another vhost")})
	if !ok || ret == nil || ret.ReplyCode != amqp091.NoRoute {
		t.Fatalf("reply from another vhost: confirmed %v, returned %+v; want returned 312", ok, ret)
	}
	select {
	case d := <-replies:
		t.Fatalf("a reply from another vhost was delivered: %q", d.Body)
	case <-time.After(200 * time.Millisecond):
	}
	_, err = other.QueueDeclarePassive(name, false, false, false, false, nil)
	var e *amqp091.Error
	if !errors.As(err, &e) || e.Code != amqp091.NotFound {
		t.Fatalf("passive declare from another vhost: %v, want 404", err)
	}
}
