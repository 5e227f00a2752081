package amqp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/config"
)

// rawHandshake opens a TCP connection and completes the handshake by hand,
// returning the connection and a frame reader positioned after open-ok.
func rawHandshake(t *testing.T, addr string) (net.Conn, *wire.Reader) {
	t.Helper()
	return rawHandshakeMax(t, addr, 10)
}

// rawHandshakeMax is rawHandshake asking for channelMax channels.
func rawHandshakeMax(t *testing.T, addr string, channelMax uint16) (net.Conn, *wire.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(nc, 4096)
	if _, err := nc.Write([]byte(wire.ProtocolHeader)); err != nil {
		t.Fatal(err)
	}
	expect := func(want string) {
		t.Helper()
		expectMethod(t, r, want)
	}
	send := func(m wire.Method) {
		if _, err := nc.Write(wire.AppendMethodFrame(nil, 0, m)); err != nil {
			t.Fatal(err)
		}
	}
	expect("connection.start")
	send(&wire.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	expect("connection.tune")
	send(&wire.ConnectionTuneOk{ChannelMax: channelMax, FrameMax: 4096, Heartbeat: 0})
	send(&wire.ConnectionOpen{VirtualHost: "/"})
	expect("connection.open-ok")
	return nc, r
}

func readClose(t *testing.T, r *wire.Reader) *wire.ConnectionClose {
	t.Helper()
	for {
		if _, m := nextMethod(t, r); m != nil {
			if c, ok := m.(*wire.ConnectionClose); ok {
				return c
			}
		}
	}
}

func TestMalformedFramesCloseOnlyTheirConnection(t *testing.T) {
	n := brokertest.Start(t)
	bystander := n.Channel(t)
	tests := []struct {
		name  string
		bytes func() []byte
		code  uint16
	}{
		{"bad frame end", func() []byte {
			f := wire.AppendMethodFrame(nil, 0, &wire.ConnectionBlocked{Reason: "x"})
			f[len(f)-1] = 0x00
			return f
		}, wire.FrameError},
		{"frame over frame_max", func() []byte {
			b := []byte{wire.FrameBody, 0, 1}
			b = binary.BigEndian.AppendUint32(b, 1<<20)
			return append(b, make([]byte, 64)...)
		}, wire.FrameError},
		{"unknown frame type", func() []byte { return []byte{9, 0, 0, 0, 0, 0, 0, wire.FrameEnd} }, wire.FrameError},
		{"body before header", func() []byte {
			b := wire.AppendMethodFrame(nil, 1, &wire.ChannelOpen{})
			return wire.AppendBodyFrames(b, 1, []byte("orphan"), 4096)
		}, wire.UnexpectedFrame},
		{"garbled method arguments", func() []byte {
			return []byte{wire.FrameMethod, 0, 0, 0, 0, 0, 6, 0, 50, 0, 10, 0, 9, wire.FrameEnd}
		}, wire.FrameError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, r := rawHandshake(t, n.AMQPAddr())
			if _, err := nc.Write(tt.bytes()); err != nil {
				t.Fatal(err)
			}
			c := readClose(t, r)
			if c.ReplyCode != tt.code {
				t.Fatalf("connection.close %d %q, want %d", c.ReplyCode, c.ReplyText, tt.code)
			}
		})
	}
	if _, err := bystander.QueueDeclare("", false, true, true, false, nil); err != nil {
		t.Fatalf("another connection suffered: %v", err)
	}
}

func TestWrongProtocolHeaderGetsOurs(t *testing.T) {
	n := brokertest.Start(t)
	nc, err := net.Dial("tcp", n.AMQPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = nc.Write([]byte("AMQP\x01\x01\x00\x0a"))
	got := make([]byte, 8)
	if _, err := io.ReadFull(nc, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte(wire.ProtocolHeader)) {
		t.Fatalf("got %q, want our protocol header", got)
	}
}

func TestNegotiationAuthAndHeartbeats(t *testing.T) {
	n := brokertest.Start(t)
	conn, err := amqp091.DialConfig(n.URL(), amqp091.Config{
		SASL:       []amqp091.Authentication{&amqp091.AMQPlainAuth{Username: "guest", Password: "guest"}},
		Heartbeat:  time.Second,
		FrameSize:  4096,
		ChannelMax: 3,
	})
	if err != nil {
		t.Fatalf("AMQPLAIN dial: %v", err)
	}
	defer conn.Close()
	if conn.Config.FrameSize != 4096 || conn.Config.ChannelMax != 3 || conn.Config.Heartbeat != time.Second {
		t.Fatalf("negotiated %+v", conn.Config)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, _ := ch.QueueDeclare("", false, true, true, false, nil)
	big := bytes.Repeat([]byte("0123456789"), 10000) // 100 kB over 4 kB frames
	if err := ch.PublishWithContext(context.Background(), "", q.Name, false, false, amqp091.Publishing{Body: big}); err != nil {
		t.Fatal(err)
	}
	// Idle for longer than two heartbeat intervals: heartbeats keep it open.
	time.Sleep(2500 * time.Millisecond)
	d, ok, err := ch.Get(q.Name, true)
	if err != nil || !ok || !bytes.Equal(d.Body, big) {
		t.Fatalf("large body across small frames after idle: ok=%v err=%v len=%d", ok, err, len(d.Body))
	}
	for i := 0; i < 2; i++ {
		if _, err := conn.Channel(); err != nil {
			t.Fatalf("channel %d of 3: %v", i+2, err)
		}
	}
	if _, err := conn.Channel(); err == nil {
		t.Fatal("a channel beyond channel_max opened")
	}
}

func TestServerCancelsConsumersOfDeletedQueue(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	q, _ := ch.QueueDeclare("doomed", false, false, false, false, nil)
	cancels := ch.NotifyCancel(make(chan string, 1))
	if _, err := ch.Consume(q.Name, "ctag-1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	other := n.Channel(t)
	if _, err := other.QueueDelete(q.Name, false, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case tag := <-cancels:
		if tag != "ctag-1" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.cancel from the server")
	}
}

func TestDeadLetteringOverAMQP(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	if err := ch.ExchangeDeclare("dlx", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	dead, _ := ch.QueueDeclare("dead", true, false, false, false, nil)
	_ = ch.QueueBind(dead.Name, "", "dlx", false, nil)
	work, err := ch.QueueDeclare("work", true, false, false, false, amqp091.Table{"x-dead-letter-exchange": "dlx"})
	if err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "", work.Name, []string{"poison"}, true)
	d, ok, err := ch.Get(work.Name, false)
	if !ok || err != nil {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := d.Reject(false); err != nil {
		t.Fatal(err)
	}
	got, ok, err := getWithin(ch, dead.Name, 5*time.Second, true)
	if !ok || err != nil {
		t.Fatalf("dead-lettered message did not arrive: %v", err)
	}
	deaths, _ := got.Headers["x-death"].([]interface{})
	if string(got.Body) != "poison" || len(deaths) != 1 {
		t.Fatalf("got %q with x-death %v", got.Body, got.Headers["x-death"])
	}
	death := deaths[0].(amqp091.Table)
	if death["reason"] != "rejected" || death["queue"] != "work" || death["count"] != int64(1) {
		t.Fatalf("x-death = %v", death)
	}
}

func TestQueueExpiresWhenUnused(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("fleeting", false, false, false, false, amqp091.Table{"x-expires": int32(200)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c := n.Channel(t)
		if _, err := c.QueueDeclarePassive("fleeting", false, false, false, false, nil); err != nil {
			var ae *amqp091.Error
			if errors.As(err, &ae) && ae.Code == 404 {
				return
			}
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("queue with x-expires 200 ms still exists after 5 s")
}

func TestInternalExchangeRefusesPublish(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	if err := ch.ExchangeDeclare("inner", "fanout", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	_ = ch.PublishWithContext(context.Background(), "inner", "", false, false, amqp091.Publishing{Body: []byte("x")})
	select {
	case e := <-closed:
		if e == nil || e.Code != 403 {
			t.Fatalf("closed with %v, want 403", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("publish to an internal exchange was accepted")
	}
}

func TestGlobalQosAndRecover(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	qa, _ := ch.QueueDeclare("", false, true, true, false, nil)
	qb, _ := ch.QueueDeclare("", false, true, true, false, nil)
	publishConfirmed(t, ch, "", qa.Name, bodies(5, "a"), false)
	publishConfirmed(t, ch, "", qb.Name, bodies(5, "b"), false)
	if err := ch.Qos(3, 0, true); err != nil {
		t.Fatal(err)
	}
	da, _ := ch.Consume(qa.Name, "", false, false, false, false, nil)
	db, _ := ch.Consume(qb.Name, "", false, false, false, false, nil)
	var got []amqp091.Delivery
	timeout := time.After(300 * time.Millisecond)
collect:
	for {
		select {
		case d := <-da:
			got = append(got, d)
		case d := <-db:
			got = append(got, d)
		case <-timeout:
			break collect
		}
	}
	if len(got) != 3 {
		t.Fatalf("global prefetch 3 across two consumers delivered %d", len(got))
	}
	// basic.recover is deprecated but still part of the protocol clients use.
	//lint:ignore SA1019 testing the deprecated method on purpose
	if err := ch.Recover(true); err != nil {
		t.Fatalf("basic.recover: %v", err)
	}
	// The three come back redelivered; the other queue's consumer may get
	// fresh messages first (the global limit counts both), which are not.
	before := map[string]bool{}
	for _, d := range got {
		before[string(d.Body)] = true
	}
	deadline := time.After(5 * time.Second)
	for again := 0; again < len(got); {
		var d amqp091.Delivery
		select {
		case d = <-da:
		case d = <-db:
		case <-deadline:
			t.Fatalf("%d of %d redelivered after basic.recover", again, len(got))
		}
		if before[string(d.Body)] {
			again++
		}
		if d.Redelivered != before[string(d.Body)] {
			t.Fatalf("after recover %q has redelivered=%v, delivered before: %v", d.Body, d.Redelivered, before[string(d.Body)])
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
}

// basic.get's deliveries are not counted against the channel's global
// prefetch, so acking them must not give consumers extra room either.
func TestGlobalQosAfterAckedGets(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	q, _ := ch.QueueDeclare("", false, true, true, false, nil)
	publishConfirmed(t, ch, "", q.Name, bodies(10, "m"), false)
	if err := ch.Qos(2, 0, true); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		d, ok, err := ch.Get(q.Name, false)
		if err != nil || !ok {
			t.Fatalf("basic.get %d: ok=%v err=%v", i, ok, err)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := ch.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	timeout := time.After(300 * time.Millisecond)
	for done := false; !done; {
		select {
		case <-ds:
			got++
		case <-timeout:
			done = true
		}
	}
	if got != 2 {
		t.Fatalf("global prefetch 2 after three acked basic.get: %d delivered unacked, want 2", got)
	}
}

func TestMemoryAlarmBlocksPublishers(t *testing.T) {
	n := brokertest.Start(t, func(c *config.Config) { c.Limits.MemoryHighWatermark = 1 })
	// A blocked connection's reader waits for the alarm to clear, so this
	// client cannot close gracefully: the test closes its socket instead.
	var raw net.Conn
	conn, err := amqp091.DialConfig(n.URL(), amqp091.Config{Dial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		raw = c
		return c, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 1))
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(context.Background(), "", "nowhere", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-blocked:
		if !b.Active || !strings.Contains(b.Reason, "memory") {
			t.Fatalf("blocked = %+v", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no connection.blocked while the memory alarm is raised")
	}
}
