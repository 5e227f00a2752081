package amqp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
)

func declare(t *testing.T, ch *amqp091.Channel, name string, durable bool, args amqp091.Table) amqp091.Queue {
	t.Helper()
	q, err := ch.QueueDeclare(name, durable, false, false, false, args)
	if err != nil {
		t.Fatalf("declare %q: %v", name, err)
	}
	return q
}

func publishConfirmed(t *testing.T, ch *amqp091.Channel, exchange, key string, bodies []string, persistent bool) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm.select: %v", err)
	}
	mode := amqp091.Transient
	if persistent {
		mode = amqp091.Persistent
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var confs []*amqp091.DeferredConfirmation
	for _, b := range bodies {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, amqp091.Publishing{DeliveryMode: mode, Body: []byte(b)})
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		confs = append(confs, dc)
	}
	for i, dc := range confs {
		ok, err := dc.WaitContext(ctx)
		if err != nil || !ok {
			t.Fatalf("confirm %d: ok=%v err=%v", i, ok, err)
		}
	}
}

func consumeN(t *testing.T, ch *amqp091.Channel, queue string, n int, autoAck bool) []amqp091.Delivery {
	t.Helper()
	msgs, err := ch.Consume(queue, "", autoAck, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	var out []amqp091.Delivery
	timeout := time.After(20 * time.Second)
	for len(out) < n {
		select {
		case d, ok := <-msgs:
			if !ok {
				t.Fatalf("delivery channel closed after %d of %d", len(out), n)
			}
			if !autoAck {
				if err := d.Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
			}
			out = append(out, d)
		case <-timeout:
			t.Fatalf("got %d of %d deliveries", len(out), n)
		}
	}
	return out
}

func bodies(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func TestPublishConsumeInOrder(t *testing.T) {
	tests := []struct {
		name       string
		durable    bool
		persistent bool
		autoAck    bool
		n          int
		size       int
	}{
		{"transient no-ack", false, false, true, 1000, 0},
		{"durable persistent acked", true, true, false, 2000, 0},
		{"large bodies go to the message store", true, true, false, 50, 10000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := brokertest.Start(t)
			ch := n.Channel(t)
			q := declare(t, ch, "", tt.durable, nil)
			if tt.durable {
				q = declare(t, ch, "q-"+strings.ReplaceAll(tt.name, " ", "-"), true, nil)
			}
			want := bodies(tt.n, strings.Repeat("x", tt.size))
			publishConfirmed(t, ch, "", q.Name, want, tt.persistent)
			if err := ch.Qos(100, 0, false); err != nil {
				t.Fatalf("qos: %v", err)
			}
			got := consumeN(t, ch, q.Name, tt.n, tt.autoAck)
			for i, d := range got {
				if string(d.Body) != want[i] {
					t.Fatalf("delivery %d: body %.40q, want %.40q", i, d.Body, want[i])
				}
				if d.Redelivered {
					t.Fatalf("delivery %d redelivered on first delivery", i)
				}
			}
			st, err := ch.QueueDeclarePassive(q.Name, tt.durable, false, false, false, nil)
			if err != nil {
				t.Fatalf("passive declare: %v", err)
			}
			if st.Messages != 0 {
				t.Fatalf("queue still holds %d messages after all were acked", st.Messages)
			}
		})
	}
}

func TestWrongCredentialsAndVhost(t *testing.T) {
	n := brokertest.Start(t)
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"bad password", n.URLFor("guest", "nope", "/"), "403"},
		{"unknown user", n.URLFor("nobody", "guest", "/"), "403"},
		{"unknown vhost", n.URLFor("guest", "guest", "missing"), "vhost 'missing' not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := amqp091.Dial(tt.url)
			if err == nil {
				c.Close()
				t.Fatalf("dial succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) && !errors.Is(err, amqp091.ErrSASL) && !errors.Is(err, amqp091.ErrCredentials) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
	// The broker still serves good clients.
	ch := n.Channel(t)
	declare(t, ch, "still-fine", false, nil)
}

func TestMandatoryReturn(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	publishConfirmed(t, ch, "amq.direct", "nowhere", nil, false)
	if err := ch.PublishWithContext(context.Background(), "amq.direct", "nowhere", true, false, amqp091.Publishing{Body: []byte("lost")}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	select {
	case r := <-returns:
		if r.ReplyCode != 312 || string(r.Body) != "lost" || r.RoutingKey != "nowhere" {
			t.Fatalf("return = %d %q key %q", r.ReplyCode, r.Body, r.RoutingKey)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no basic.return for an unroutable mandatory message")
	}
}

func TestRoutingByExchangeType(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	type bind struct {
		queue, exchange, key string
		args                 amqp091.Table
	}
	exchanges := []struct{ name, kind string }{{"x.direct", "direct"}, {"x.fanout", "fanout"}, {"x.topic", "topic"}, {"x.headers", "headers"}, {"x.inner", "fanout"}}
	for _, x := range exchanges {
		if err := ch.ExchangeDeclare(x.name, x.kind, false, false, false, false, nil); err != nil {
			t.Fatalf("declare exchange %s: %v", x.name, err)
		}
	}
	for _, q := range []string{"qa", "qb", "qc"} {
		declare(t, ch, q, false, nil)
	}
	binds := []bind{
		{"qa", "x.direct", "red", nil},
		{"qb", "x.direct", "blue", nil},
		{"qa", "x.fanout", "", nil},
		{"qb", "x.fanout", "", nil},
		{"qa", "x.topic", "a.*.c", nil},
		{"qb", "x.topic", "a.#", nil},
		{"qa", "x.headers", "", amqp091.Table{"x-match": "all", "k": "v", "n": int32(1)}},
		{"qb", "x.headers", "", amqp091.Table{"x-match": "any", "k": "v", "n": int32(2)}},
		{"qc", "x.inner", "", nil},
	}
	for _, b := range binds {
		if err := ch.QueueBind(b.queue, b.key, b.exchange, false, b.args); err != nil {
			t.Fatalf("bind %+v: %v", b, err)
		}
	}
	if err := ch.ExchangeBind("x.inner", "#", "x.topic", false, nil); err != nil {
		t.Fatalf("exchange bind: %v", err)
	}
	tests := []struct {
		exchange, key string
		headers       amqp091.Table
		want          map[string]bool
	}{
		{"x.direct", "red", nil, map[string]bool{"qa": true}},
		{"x.direct", "green", nil, map[string]bool{}},
		{"x.fanout", "anything", nil, map[string]bool{"qa": true, "qb": true}},
		{"x.topic", "a.b.c", nil, map[string]bool{"qa": true, "qb": true, "qc": true}},
		{"x.topic", "a", nil, map[string]bool{"qb": true, "qc": true}},
		{"x.topic", "b.b.c", nil, map[string]bool{"qc": true}},
		{"x.headers", "", amqp091.Table{"k": "v", "n": int32(1)}, map[string]bool{"qa": true, "qb": true}},
		{"x.headers", "", amqp091.Table{"k": "w", "n": int32(2)}, map[string]bool{"qb": true}},
		{"", "qc", nil, map[string]bool{"qc": true}},
	}
	for i, tt := range tests {
		body := fmt.Sprintf("m%d", i)
		if err := ch.PublishWithContext(context.Background(), tt.exchange, tt.key, false, false, amqp091.Publishing{Headers: tt.headers, Body: []byte(body)}); err != nil {
			t.Fatalf("publish: %v", err)
		}
		for _, q := range []string{"qa", "qb", "qc"} {
			d, ok, err := getWithin(ch, q, 2*time.Second, tt.want[q])
			if err != nil {
				t.Fatalf("get %s: %v", q, err)
			}
			if ok != tt.want[q] {
				t.Fatalf("publish %d to %q key %q: queue %s got message=%v, want %v", i, tt.exchange, tt.key, q, ok, tt.want[q])
			}
			if ok && string(d.Body) != body {
				t.Fatalf("queue %s got %q, want %q", q, d.Body, body)
			}
		}
	}
}

// getWithin polls basic.get until a message arrives or the wait is over; when
// expect is false it checks once after a short pause.
func getWithin(ch *amqp091.Channel, q string, wait time.Duration, expect bool) (amqp091.Delivery, bool, error) {
	deadline := time.Now().Add(wait)
	if !expect {
		time.Sleep(50 * time.Millisecond)
		return ch.Get(q, true)
	}
	for {
		d, ok, err := ch.Get(q, true)
		if err != nil || ok || time.Now().After(deadline) {
			return d, ok, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRequeueKeepsPlaceAndRedelivers(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	q := declare(t, ch, "", false, nil)
	publishConfirmed(t, ch, "", q.Name, []string{"a", "b", "c"}, false)
	var ds []amqp091.Delivery
	for i := 0; i < 3; i++ {
		d, ok, err := ch.Get(q.Name, false)
		if err != nil || !ok {
			t.Fatalf("get %d: ok=%v err=%v", i, ok, err)
		}
		ds = append(ds, d)
	}
	if err := ds[1].Nack(false, true); err != nil {
		t.Fatalf("nack: %v", err)
	}
	if err := ds[0].Reject(true); err != nil {
		t.Fatalf("reject: %v", err)
	}
	if err := ds[2].Ack(false); err != nil {
		t.Fatalf("ack: %v", err)
	}
	for _, want := range []string{"a", "b"} {
		d, ok, err := getWithin(ch, q.Name, 2*time.Second, true)
		if err != nil || !ok {
			t.Fatalf("get after requeue: ok=%v err=%v", ok, err)
		}
		if string(d.Body) != want || !d.Redelivered {
			t.Fatalf("got %q redelivered=%v, want %q redelivered", d.Body, d.Redelivered, want)
		}
	}
}

func TestChannelErrors(t *testing.T) {
	n := brokertest.Start(t)
	conn := n.Dial(t)
	other := n.Dial(t)
	setup, _ := conn.Channel()
	declare(t, setup, "durable-q", true, nil)
	if _, err := setup.QueueDeclare("excl", false, false, true, false, nil); err != nil {
		t.Fatalf("declare exclusive: %v", err)
	}
	tests := []struct {
		name string
		run  func(ch *amqp091.Channel) error
		code int
	}{
		{"passive declare of a missing queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("missing", false, false, false, false, nil)
			return err
		}, 404},
		{"inequivalent redeclare", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("durable-q", false, false, false, false, nil)
			return err
		}, 406},
		{"exclusive queue of another connection", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("excl", false, false, true, false, nil)
			return err
		}, 405},
		{"reserved amq. prefix", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("amq.mine", false, false, false, false, nil)
			return err
		}, 403},
		{"bind to a missing exchange", func(ch *amqp091.Channel) error {
			return ch.QueueBind("durable-q", "k", "no-such-exchange", false, nil)
		}, 404},
		{"delete if-empty with messages", func(ch *amqp091.Channel) error {
			if err := ch.PublishWithContext(context.Background(), "", "durable-q", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
			_, err := ch.QueueDelete("durable-q", false, true, false)
			return err
		}, 406},
		{"unknown delivery tag", func(ch *amqp091.Channel) error {
			// basic.ack has no reply: the 406 arrives as a channel.close,
			// which may land before or after the next call is sent.
			closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
			if err := ch.Ack(999, false); err != nil {
				return err
			}
			select {
			case e := <-closed:
				if e == nil {
					return errors.New("channel closed without an error")
				}
				return e
			case <-time.After(10 * time.Second):
				return errors.New("channel not closed after an unknown delivery tag")
			}
		}, 406},
		{"inequivalent exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("amq.direct", "fanout", true, false, false, false, nil)
		}, 406},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := other.Channel()
			if err != nil {
				t.Fatalf("channel: %v", err)
			}
			err = tt.run(ch)
			var ae *amqp091.Error
			if !errors.As(err, &ae) {
				t.Fatalf("got %v, want AMQP error %d", err, tt.code)
			}
			if ae.Code != tt.code {
				t.Fatalf("got %d %s, want %d", ae.Code, ae.Reason, tt.code)
			}
			// A channel error leaves the connection usable.
			if _, err := other.Channel(); err != nil {
				t.Fatalf("connection unusable after channel error: %v", err)
			}
		})
	}
}

// TestRedeclareComparesArgumentsByNumber: clients encode the same number
// in different field-table widths (RabbitMQ's Java client sends an int as a
// long, amqp091-go keeps the Go type); a redeclare is equivalent when the
// numbers are, and refused with 406 when they differ.
func TestRedeclareComparesArgumentsByNumber(t *testing.T) {
	n := brokertest.Start(t)
	conn := n.Dial(t)
	setup, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	declare(t, setup, "limited", true, amqp091.Table{"x-max-length": int32(100)})
	tests := []struct {
		name  string
		value any
		code  int // 0: accepted
	}{
		{"same number as a short", int16(100), 0},
		{"same number as a long-long", int64(100), 0},
		{"same number as an octet", uint8(100), 0},
		{"another number", int32(101), 406},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := conn.Channel()
			if err != nil {
				t.Fatalf("channel: %v", err)
			}
			_, err = ch.QueueDeclare("limited", true, false, false, false, amqp091.Table{"x-max-length": tt.value})
			if tt.code == 0 {
				if err != nil {
					t.Fatalf("redeclare with %T(%v): %v", tt.value, tt.value, err)
				}
				return
			}
			var ae *amqp091.Error
			if !errors.As(err, &ae) || ae.Code != tt.code || !strings.Contains(ae.Reason, "x-max-length") {
				t.Fatalf("redeclare with %T(%v): %v, want %d naming x-max-length", tt.value, tt.value, err, tt.code)
			}
		})
	}
}

func TestPublishToMissingExchangeClosesChannel(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	if err := ch.PublishWithContext(context.Background(), "missing", "k", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	select {
	case e := <-closed:
		if e == nil || e.Code != 404 || !strings.Contains(e.Reason, "no exchange 'missing'") {
			t.Fatalf("channel closed with %v, want 404 no exchange", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("channel not closed")
	}
}

func TestTransactions(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	q := declare(t, ch, "", false, nil)
	if err := ch.Tx(); err != nil {
		t.Fatalf("tx.select: %v", err)
	}
	pub := func(b string) {
		if err := ch.PublishWithContext(context.Background(), "", q.Name, false, false, amqp091.Publishing{Body: []byte(b)}); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	pub("rolled-back")
	if err := ch.TxRollback(); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	pub("committed")
	if st, _ := ch.QueueDeclarePassive(q.Name, false, false, false, false, nil); st.Messages != 0 {
		t.Fatalf("uncommitted publish visible: %d messages", st.Messages)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	d, ok, err := ch.Get(q.Name, true)
	if err != nil || !ok || string(d.Body) != "committed" {
		t.Fatalf("get = %q ok=%v err=%v, want committed", d.Body, ok, err)
	}
	if _, ok, _ := ch.Get(q.Name, true); ok {
		t.Fatal("rolled back message was delivered")
	}
}

func TestPrefetchLimitsUnacked(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	q := declare(t, ch, "", false, nil)
	publishConfirmed(t, ch, "", q.Name, bodies(20, "p"), false)
	if err := ch.Qos(5, 0, false); err != nil {
		t.Fatalf("qos: %v", err)
	}
	msgs, err := ch.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	var got []amqp091.Delivery
	for len(got) < 5 {
		select {
		case d := <-msgs:
			got = append(got, d)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d deliveries, want 5", len(got))
		}
	}
	select {
	case d := <-msgs:
		t.Fatalf("delivery %q beyond prefetch 5", d.Body)
	case <-time.After(200 * time.Millisecond):
	}
	if err := got[4].Ack(true); err != nil {
		t.Fatalf("ack multiple: %v", err)
	}
	for i := 0; i < 5; i++ {
		select {
		case <-msgs:
		case <-time.After(5 * time.Second):
			t.Fatalf("credit not returned after multiple ack: got %d more", i)
		}
	}
}

// TestAcksReachTheQueueWithoutFurtherTraffic: a few acks and then silence
// on the connection still settle the messages in the queue (acks are
// handed to queues in batches, the last batch by a timer), as another
// client sees: the queue empties.
func TestAcksReachTheQueueWithoutFurtherTraffic(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	q := declare(t, ch, "settled", false, nil)
	publishConfirmed(t, ch, "", q.Name, bodies(10, "m"), false)
	if err := ch.Qos(100, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		select {
		case d := <-ds:
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d of 10 messages", i)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		unacked := unackedOverHTTP(t, n, q.Name)
		if unacked == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue still counts %d unacked messages after every ack", unacked)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unackedOverHTTP reads a queue's messages_unacknowledged from the HTTP API.
func unackedOverHTTP(t *testing.T, n *brokertest.Node, queue string) int {
	t.Helper()
	var q struct {
		Unacked *int `json:"messages_unacknowledged"`
	}
	if code := n.API(t, http.MethodGet, "/api/queues/%2F/"+url.PathEscape(queue), nil, &q); code != http.StatusOK || q.Unacked == nil {
		t.Fatalf("GET queue %s: status %d, no messages_unacknowledged", queue, code)
	}
	return *q.Unacked
}

// A confirm says the queues have the message: a basic.get on another
// connection right after it finds it, for a lone publish into an idle queue
// (whose turn runs on the reader) and for a fanout to two queues alike.
func TestConfirmedMessageIsVisibleToGet(t *testing.T) {
	tests := []struct {
		name   string
		queues []string
	}{
		{"one queue", []string{"seen"}},
		{"fanout to two queues", []string{"seen.a", "seen.b"}},
	}
	n := brokertest.Start(t)
	pub, get := n.Channel(t), n.Channel(t)
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := "fan." + tt.queues[0]
			if err := pub.ExchangeDeclare(ex, "fanout", false, true, false, false, nil); err != nil {
				t.Fatal(err)
			}
			for _, q := range tt.queues {
				declare(t, pub, q, true, nil)
				if err := pub.QueueBind(q, "", ex, false, nil); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 300 {
				body := fmt.Sprint(i)
				dc, err := pub.PublishWithDeferredConfirmWithContext(context.Background(), ex, "", false, false, amqp091.Publishing{Body: []byte(body)})
				if err != nil || !dc.Wait() {
					t.Fatalf("publish %d: %v", i, err)
				}
				for _, q := range tt.queues {
					d, ok, err := get.Get(q, true)
					if err != nil || !ok || string(d.Body) != body {
						t.Fatalf("get from %s after confirm %d: ok %v err %v body %q", q, i, ok, err, d.Body)
					}
				}
			}
		})
	}
}
