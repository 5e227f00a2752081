package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	stream "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
)

func declareStream(t *testing.T, ch *amqp.Channel, name string, args amqp.Table) {
	t.Helper()
	a := amqp.Table{"x-queue-type": "stream"}
	for k, v := range args {
		a[k] = v
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, a); err != nil {
		t.Fatalf("declare stream %s: %v", name, err)
	}
}

// publishConfirmed publishes n messages body-i (from first) and waits for
// their confirms.
func publishConfirmed(t *testing.T, ch *amqp.Channel, queue string, first, n int) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var dcs []*amqp.DeferredConfirmation
	for i := first; i < first+n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent,
			ContentType:  "text/plain",
			MessageId:    fmt.Sprintf("id-%d", i),
			Headers:      amqp.Table{"i": int32(i), "nested": amqp.Table{"k": "v"}},
			Body:         []byte(fmt.Sprintf("body-%d", i)),
		})
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		ok, err := dc.WaitContext(ctx)
		if err != nil || !ok {
			t.Fatalf("confirm %d: %v %v", dc.DeliveryTag, ok, err)
		}
	}
}

// consume reads n messages from a stream consumer with prefetch and manual
// acks, acking each, and returns their bodies and x-stream-offset values.
func consume(t *testing.T, ch *amqp.Channel, queue string, offset any, prefetch, n int) ([]string, []int64) {
	t.Helper()
	if err := ch.Qos(prefetch, 0, false); err != nil {
		t.Fatal(err)
	}
	args := amqp.Table{}
	if offset != nil {
		args["x-stream-offset"] = offset
	}
	tag := fmt.Sprintf("c-%d", time.Now().UnixNano())
	ds, err := ch.Consume(queue, tag, false, false, false, false, args)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	var bodies []string
	var offs []int64
	timeout := time.After(20 * time.Second)
	for len(bodies) < n {
		select {
		case d, ok := <-ds:
			if !ok {
				t.Fatalf("deliveries closed after %d", len(bodies))
			}
			bodies = append(bodies, string(d.Body))
			off, _ := d.Headers["x-stream-offset"].(int64)
			offs = append(offs, off)
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatalf("got %d of %d messages", len(bodies), n)
		}
	}
	if err := ch.Cancel(tag, false); err != nil {
		t.Fatal(err)
	}
	return bodies, offs
}

// streamProducer declares stream name over the stream protocol (official
// client) and returns a producer on it; both close when the test ends.
func streamProducer(t *testing.T, n *brokertest.Node, name string) *stream.Producer {
	t.Helper()
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri(n.StreamURI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	if err := env.DeclareStream(name, nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestStreamPublishConsumeAMQP(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	declareStream(t, ch, "s1", amqp.Table{
		"x-max-length-bytes":              int64(1 << 30),
		"x-max-age":                       "7D",
		"x-stream-max-segment-size-bytes": int32(4096),
	})
	const total = 500
	publishConfirmed(t, ch, "s1", 0, total)

	// More messages than the prefetch: credit comes back with acks.
	c2, err := n.Dial(t).Channel()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := func() (<-chan amqp.Delivery, error) {
		c2.Qos(10, 0, false)
		return c2.Consume("s1", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	}()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		select {
		case d := <-ds:
			off, _ := d.Headers["x-stream-offset"].(int64)
			if string(d.Body) != fmt.Sprintf("body-%d", i) || off != int64(i) {
				t.Fatalf("message %d: %q at offset %d", i, d.Body, off)
			}
			if d.MessageId != fmt.Sprintf("id-%d", i) || d.ContentType != "text/plain" || d.DeliveryMode != amqp.Persistent ||
				d.Headers["i"] != int32(i) || fmt.Sprint(d.Headers["nested"]) != "map[k:v]" || d.RoutingKey != "s1" {
				t.Fatalf("message %d properties: %+v", i, d)
			}
			d.Ack(false)
		case <-time.After(10 * time.Second):
			t.Fatalf("stalled after %d messages", i)
		}
	}
	select {
	case d := <-ds:
		t.Fatalf("extra message %q", d.Body)
	case <-time.After(100 * time.Millisecond):
	}
	q, err := ch.QueueDeclarePassive("s1", true, false, false, false, nil)
	if err != nil || q.Messages != total {
		t.Fatalf("passive declare: %+v %v", q, err)
	}
}

func TestStreamOffsetsAMQP(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	declareStream(t, ch, "s2", nil)
	before := time.Now().Add(-time.Second)
	publishConfirmed(t, ch, "s2", 0, 20)

	for _, tc := range []struct {
		name   string
		offset any
		first  int64
	}{
		{"first", "first", 0},
		{"offset", int64(7), 7},
		{"offset-int32", int32(13), 13},
		{"timestamp", before, 0},
		{"interval", "10m", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := n.Channel(t)
			want := int(20 - tc.first)
			bodies, offs := consume(t, ch, "s2", tc.offset, 5, want)
			if offs[0] != tc.first || bodies[0] != fmt.Sprintf("body-%d", tc.first) || offs[len(offs)-1] != 19 {
				t.Fatalf("from %d: %v", tc.first, offs)
			}
		})
	}
	t.Run("last", func(t *testing.T) {
		// The last chunk holds what the last Publish batch carried.
		ch := n.Channel(t)
		_, offs := consume(t, ch, "s2", "last", 5, 1)
		if offs[0] < 0 || offs[0] > 19 {
			t.Fatalf("last starts at %d", offs[0])
		}
	})
	t.Run("next", func(t *testing.T) {
		ch := n.Channel(t)
		ch.Qos(5, 0, false)
		ds, err := ch.Consume("s2", "", false, false, false, false, amqp.Table{"x-stream-offset": "next"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-ds:
			t.Fatalf("next consumer got old message %q", d.Body)
		case <-time.After(200 * time.Millisecond):
		}
		publishConfirmed(t, n.Channel(t), "s2", 20, 1)
		select {
		case d := <-ds:
			if string(d.Body) != "body-20" {
				t.Fatalf("got %q", d.Body)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("next consumer got nothing")
		}
	})
	t.Run("default-is-next", func(t *testing.T) {
		ch := n.Channel(t)
		ch.Qos(5, 0, false)
		ds, _ := ch.Consume("s2", "", false, false, false, false, nil)
		select {
		case d := <-ds:
			t.Fatalf("default consumer got old message %q", d.Body)
		case <-time.After(200 * time.Millisecond):
		}
	})
}

func amqpCode(err error) int {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

func TestStreamRefusalsAMQP(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	declareStream(t, ch, "s3", nil)

	t.Run("no-prefetch", func(t *testing.T) {
		ch := n.Channel(t)
		_, err := ch.Consume("s3", "", false, false, false, false, nil)
		if amqpCode(err) != amqp.PreconditionFailed {
			t.Fatalf("consume without prefetch: %v", err)
		}
	})
	t.Run("auto-ack", func(t *testing.T) {
		ch := n.Channel(t)
		ch.Qos(10, 0, false)
		_, err := ch.Consume("s3", "", true, false, false, false, nil)
		if amqpCode(err) != amqp.NotImplemented {
			t.Fatalf("auto-ack consume: %v", err)
		}
	})
	t.Run("basic-get", func(t *testing.T) {
		ch := n.Channel(t)
		_, _, err := ch.Get("s3", false)
		if amqpCode(err) != amqp.NotImplemented {
			t.Fatalf("basic.get: %v", err)
		}
	})
	t.Run("bad-offset", func(t *testing.T) {
		ch := n.Channel(t)
		ch.Qos(10, 0, false)
		_, err := ch.Consume("s3", "", false, false, false, false, amqp.Table{"x-stream-offset": "yesterday"})
		if amqpCode(err) != amqp.PreconditionFailed {
			t.Fatalf("bad offset: %v", err)
		}
	})
	t.Run("not-durable", func(t *testing.T) {
		ch := n.Channel(t)
		_, err := ch.QueueDeclare("s4", false, false, false, false, amqp.Table{"x-queue-type": "stream"})
		if amqpCode(err) != amqp.PreconditionFailed {
			t.Fatalf("transient stream: %v", err)
		}
	})
}

func TestStreamSurvivesRestartAMQP(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	declareStream(t, ch, "s5", nil)
	publishConfirmed(t, ch, "s5", 0, 50)
	n = n.Restart()
	bodies, offs := consume(t, n.Channel(t), "s5", "first", 7, 50)
	if bodies[49] != "body-49" || offs[49] != 49 {
		t.Fatalf("after restart: %v", offs)
	}
}

// Messages published over AMQP 0.9.1 are AMQP 1.0 messages to the stream
// protocol's official client.
func TestStreamAMQPToStreamClient(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	declareStream(t, ch, "s6", nil)
	publishConfirmed(t, ch, "s6", 0, 10)
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri(n.StreamURI()))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	got := make(chan string, 10)
	props := make(chan string, 10)
	c, err := env.NewConsumer("s6", func(_ stream.ConsumerContext, m *streamamqp.Message) {
		got <- string(m.GetData())
		if m.Properties != nil {
			props <- fmt.Sprint(m.Properties.MessageID, " ", m.ApplicationProperties["i"])
		}
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 10; i++ {
		select {
		case b := <-got:
			if b != fmt.Sprintf("body-%d", i) {
				t.Fatalf("message %d: %q", i, b)
			}
			if p := <-props; p != fmt.Sprintf("id-%d %d", i, i) {
				t.Fatalf("message %d properties: %s", i, p)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("stream client got %d messages", i)
		}
	}
}

// Messages published by the stream protocol's official client reach AMQP
// 0.9.1 consumers with their body, properties and application properties.
func TestStreamClientToAMQP(t *testing.T) {
	n := brokertest.Start(t)
	p := streamProducer(t, n, "s7")
	confirmed := make(chan int, 100)
	confirms := p.NotifyPublishConfirmation()
	go func() {
		for cs := range confirms {
			for _, c := range cs {
				if c.IsConfirmed() {
					confirmed <- 1
				}
			}
		}
	}()
	const total = 100
	for i := 0; i < total; i++ {
		m := streamamqp.NewMessage([]byte(fmt.Sprintf("from-stream-%d", i)))
		m.Properties = &streamamqp.MessageProperties{ContentType: "text/plain"}
		m.ApplicationProperties = map[string]interface{}{"n": int32(i % 3)}
		if err := p.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < total; i++ {
		select {
		case <-confirmed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d confirms", i)
		}
	}
	p.Close()
	ch := n.Channel(t)
	ch.Qos(50, 0, false)
	ds, err := ch.Consume("s7", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		select {
		case d := <-ds:
			if string(d.Body) != fmt.Sprintf("from-stream-%d", i) || d.ContentType != "text/plain" ||
				fmt.Sprint(d.Headers["n"]) != fmt.Sprint(i%3) || d.Headers["x-stream-offset"] != int64(i) || d.RoutingKey != "s7" {
				t.Fatalf("message %d: %q %q headers %v key %q", i, d.Body, d.ContentType, d.Headers, d.RoutingKey)
			}
			d.Ack(false)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d of %d", i, total)
		}
	}
}

// The vhost's read-ahead setting changes at runtime through the HTTP API,
// for the readers already open too (they share the vhost's setting), and
// consumers keep reading across the change.
func TestStreamReadAheadChangedOverHTTP(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	declareStream(t, ch, "s8", nil)
	publishConfirmed(t, ch, "s8", 0, 20)
	vh, ok := n.Broker.Vhost("/")
	if !ok {
		t.Fatal("no vhost /")
	}
	if on, limit := vh.StreamReadAhead().Get(); !on || limit != 4096 {
		t.Fatalf("default read-ahead %v %d", on, limit)
	}
	c := n.Channel(t)
	c.Qos(100, 0, false)
	ds, err := c.Consume("s8", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	recv := func(want int) {
		t.Helper()
		for i := 0; i < want; i++ {
			select {
			case d := <-ds:
				d.Ack(false)
			case <-time.After(10 * time.Second):
				t.Fatalf("got %d of %d", i, want)
			}
		}
	}
	recv(20)
	put := func(body string) {
		t.Helper()
		if code := n.API(t, http.MethodPut, "/api/vhosts/%2F", json.RawMessage(body), nil); code/100 != 2 {
			t.Fatalf("PUT vhost: status %d", code)
		}
	}
	put(`{"storage": {"stream-read-ahead": false, "stream-read-ahead-limit": 8192}}`)
	if on, limit := vh.StreamReadAhead().Get(); on || limit != 8192 {
		t.Fatalf("read-ahead after PUT: %v %d", on, limit)
	}
	publishConfirmed(t, ch, "s8", 20, 20)
	recv(20)
	put(`{"storage": {"stream-read-ahead": true}}`)
	if on, _ := vh.StreamReadAhead().Get(); !on {
		t.Fatal("read-ahead still off")
	}
}

// x-max-length-bytes and x-stream-max-segment-size-bytes given over AMQP
// drive retention: old segments go, a "first" consumer starts later.
func TestStreamRetentionArgsAMQP(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	declareStream(t, ch, "s9", amqp.Table{"x-max-length-bytes": int64(20_000), "x-stream-max-segment-size-bytes": int64(5_000)})
	for i := 0; i < 10; i++ {
		publishConfirmed(t, ch, "s9", i*50, 50)
	}
	q, err := ch.QueueDeclarePassive("s9", true, false, false, false, amqp.Table{"x-queue-type": "stream"})
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages >= 500 || q.Messages == 0 {
		t.Fatalf("%d messages after retention", q.Messages)
	}
	bodies, offs := consume(t, n.Channel(t), "s9", "first", 50, q.Messages)
	if offs[0] == 0 || offs[0] != int64(500-q.Messages) || bodies[len(bodies)-1] != "body-499" {
		t.Fatalf("first offset %d with %d messages left, last %q", offs[0], q.Messages, bodies[len(bodies)-1])
	}
}

// x-stream-filter-value on published messages and x-stream-filter on
// consumers: chunks without the wanted value are not delivered.
func TestStreamFilterAMQP(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	declareStream(t, ch, "s10", nil)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	// One confirmed publish per chunk: colour k%3, and chunks of
	// unfiltered messages in between.
	for k := 0; k < 30; k++ {
		h := amqp.Table{}
		if k%4 != 3 {
			h["x-stream-filter-value"] = []string{"red", "green", "blue"}[k%3]
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "s10", false, false, amqp.Publishing{Headers: h, Body: []byte(fmt.Sprint(k))})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
			t.Fatal("not confirmed")
		}
	}
	for _, tc := range []struct {
		name       string
		args       amqp.Table
		wantColour func(string) bool
	}{
		{"red", amqp.Table{"x-stream-filter": "red"}, func(c string) bool { return c == "red" }},
		{"red-blue", amqp.Table{"x-stream-filter": []any{"red", "blue"}}, func(c string) bool { return c == "red" || c == "blue" }},
		{"green-unfiltered", amqp.Table{"x-stream-filter": "green", "x-stream-match-unfiltered": true}, func(c string) bool { return c == "green" || c == "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := n.Channel(t)
			c.Qos(100, 0, false)
			tc.args["x-stream-offset"] = "first"
			ds, err := c.Consume("s10", "", false, false, false, false, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for k := 0; k < 30; k++ {
				colour := ""
				if k%4 != 3 {
					colour = []string{"red", "green", "blue"}[k%3]
				}
				if tc.wantColour(colour) {
					want++
				}
			}
			// Every wanted message comes; then a quiet moment for any
			// others a bloom filter let through.
			got, wanted := 0, 0
			deadline := time.After(20 * time.Second)
			for quiet := false; !quiet; {
				idle := time.After(time.Hour)
				if wanted == want {
					idle = time.After(300 * time.Millisecond)
				}
				select {
				case d := <-ds:
					got++
					colour, _ := d.Headers["x-stream-filter-value"].(string)
					if tc.wantColour(colour) {
						wanted++
					}
					d.Ack(false)
				case <-idle:
					quiet = true
				case <-deadline:
					t.Fatalf("got %d messages, %d of the %d wanted", got, wanted, want)
				}
			}
			// Bloom filters may let a few others through, never drop one.
			if wanted != want || got > want+3 {
				t.Fatalf("got %d messages, %d of the %d wanted", got, wanted, want)
			}
		})
	}
}

// A consumer that acks all its credit back at once (multiple) races the
// queue taking its last credit: the queue must never end up waiting for
// credit that came back meanwhile.
func TestStreamConsumerNeverStallsOnMultipleAcks(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	declareStream(t, ch, "acks", nil)
	const total = 20000
	pub, err := n.Dial(t).Channel()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		if err := pub.PublishWithContext(context.Background(), "", "acks", false, false, amqp.Publishing{Body: []byte("m")}); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	for _, prefetch := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("prefetch %d", prefetch), func(t *testing.T) {
			c, err := n.Dial(t).Channel()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Qos(prefetch, 0, false); err != nil {
				t.Fatal(err)
			}
			ds, err := c.Consume("acks", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
			if err != nil {
				t.Fatal(err)
			}
			for got := 1; got <= total; got++ {
				select {
				case d := <-ds:
					if got%prefetch == 0 {
						if err := d.Ack(true); err != nil {
							t.Fatal(err)
						}
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("stalled after %d of %d messages", got-1, total)
				}
			}
		})
	}
}
