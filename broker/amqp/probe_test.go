package amqp_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/config"
)

// The malformed-frame probes (make test-security): what a hostile or
// broken client sends over a raw socket gets RabbitMQ's answer, and costs
// the broker no more than the bytes it sent.

// publishFrames appends basic.publish to the default exchange and a
// content header declaring size body bytes.
func publishFrames(b []byte, ch uint16, key string, size uint64, props []byte) []byte {
	b = wire.AppendMethodFrame(b, ch, &wire.BasicPublish{RoutingKey: key})
	return wire.AppendHeaderFrame(b, ch, wire.ClassBasic, size, props)
}

func write(t *testing.T, nc net.Conn, b []byte) {
	t.Helper()
	if _, err := nc.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// nextMethod reads frames up to the next method frame and decodes it.
func nextMethod(t *testing.T, r *wire.Reader) (uint16, wire.Method) {
	t.Helper()
	for {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("connection ended: %v", err)
		}
		if f.Type != wire.FrameMethod {
			continue
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		return f.Channel, m
	}
}

func TestProbeDeclaredBodySizeOverMaxIsRefused(t *testing.T) {
	n := brokertest.Start(t)
	bystander := n.Channel(t)
	maxSize := uint64(n.Cfg.Limits.MaxMessageSize)
	for _, size := range []uint64{math.MaxUint64, 1 << 63, maxSize + 1} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			nc, r := rawHandshake(t, n.AMQPAddr())
			write(t, nc, wire.AppendMethodFrame(nil, 1, &wire.ChannelOpen{}))
			expectMethod(t, r, "channel.open-ok")
			// A body frame follows, as a client would send it: the
			// closing channel ignores it.
			b := publishFrames(nil, 1, "probe", size, nil)
			write(t, nc, wire.AppendBodyFrames(b, 1, []byte("x"), 4096))
			ch, m := nextMethod(t, r)
			c, ok := m.(*wire.ChannelClose)
			want := fmt.Sprintf("message size %d is larger than configured max size %d", size, maxSize)
			if !ok || ch != 1 || c.ReplyCode != wire.PreconditionFailed || !strings.Contains(c.ReplyText, want) {
				t.Fatalf("got %s on channel %d (%+v), want channel.close 406 %q", m.Name(), ch, m, want)
			}
			// The connection lives on: the channel reopens and publishes.
			write(t, nc, wire.AppendMethodFrame(nil, 1, &wire.ChannelCloseOk{}))
			write(t, nc, wire.AppendMethodFrame(nil, 1, &wire.ChannelOpen{}))
			expectMethod(t, r, "channel.open-ok")
		})
	}
	if _, err := bystander.QueueDeclare("", false, true, true, false, nil); err != nil {
		t.Fatalf("another connection suffered: %v", err)
	}
}

// heapObjects is the process's live heap after a collection (the broker
// runs in this process).
func heapObjects() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestProbeHeadersDeclaringLargeBodiesCostNothing(t *testing.T) {
	// 80 channels each declare a 128 MiB body (the max message size) in a
	// 22-byte header and send none of it: 10 GiB promised, nothing sent.
	const channels, size = 80, 128 << 20
	n := brokertest.Start(t, func(c *config.Config) {
		c.Limits.MemoryHighWatermark = 1 << 30
		c.Limits.MaxMessageSize = size
	})
	publisher := n.Channel(t)
	q, err := publisher.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := publisher.Confirm(false); err != nil {
		t.Fatal(err)
	}
	before := heapObjects()
	nc, r := rawHandshakeMax(t, n.AMQPAddr(), 0)
	var b []byte
	for ch := uint16(1); ch <= channels; ch++ {
		b = wire.AppendMethodFrame(b, ch, &wire.ChannelOpen{})
		b = publishFrames(b, ch, q.Name, size, nil)
	}
	// A last channel.open: once it is answered, every header was handled.
	write(t, nc, wire.AppendMethodFrame(b, channels+1, &wire.ChannelOpen{}))
	for ch := uint16(1); ch <= channels+1; ch++ {
		if got, m := nextMethod(t, r); got != ch || m.Name() != "channel.open-ok" {
			t.Fatalf("got %s on channel %d, want channel.open-ok on %d", m.Name(), got, ch)
		}
	}
	if grown := int64(heapObjects()) - int64(before); grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB for %d headers without a body", grown>>20, channels)
	}
	eventually.Holds(t, 2500*time.Millisecond, "memory alarm", func() error {
		if a := n.Alarms(); len(a) > 0 {
			return fmt.Errorf("raised: %v", a)
		}
		return nil
	})
	// Another publisher is not blocked: its message is confirmed.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dc, err := publisher.PublishWithDeferredConfirmWithContext(ctx, "", q.Name, false, false, amqp091.Publishing{Body: []byte("still flowing")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("publisher not confirmed: ok=%v err=%v", ok, err)
	}
	// The promised bodies may still come, and the connection goes on.
	write(t, nc, wire.AppendBodyFrames(nil, 1, make([]byte, 3000), 4096))
	write(t, nc, wire.AppendMethodFrame(nil, channels+1, &wire.ChannelClose{}))
	expectMethod(t, r, "channel.close-ok")
}

// nestedHeaders is a raw property list whose headers table nests depth
// tables in all: {"t": {"t": ... {}}}.
func nestedHeaders(depth int) []byte {
	table := []byte{0, 0, 0, 0}
	for i := 1; i < depth; i++ {
		inner := table
		table = binary.BigEndian.AppendUint32(nil, uint32(3+len(inner)))
		table = append(append(table, 1, 't', 'F'), inner...)
	}
	return append(binary.BigEndian.AppendUint16(nil, wire.FlagHeaders), table...)
}

func TestProbeHeadersNestedTooDeepAreRefusedAtPublish(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	q, err := ch.QueueDeclare("deep-headers", false, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, r := rawHandshake(t, n.AMQPAddr())
	write(t, nc, wire.AppendMethodFrame(nil, 1, &wire.ChannelOpen{}))
	expectMethod(t, r, "channel.open-ok")
	for _, tt := range []struct {
		depth  int
		refuse bool
	}{{wire.MaxNestingDepth, false}, {wire.MaxNestingDepth + 1, true}} {
		b := publishFrames(nil, 1, q.Name, 4, nestedHeaders(tt.depth))
		b = wire.AppendBodyFrames(b, 1, []byte("deep"), 4096)
		// A method after the publish: its answer comes after any error.
		write(t, nc, wire.AppendMethodFrame(b, 1, &wire.BasicQos{PrefetchCount: 1}))
		_, m := nextMethod(t, r)
		if c, ok := m.(*wire.ChannelClose); tt.refuse != ok || (ok && c.ReplyCode != wire.PreconditionFailed) {
			t.Fatalf("headers %d tables deep: got %s %+v, want refused=%v (406)", tt.depth, m.Name(), m, tt.refuse)
		}
	}
	// Only what was accepted was queued, and it reads back with its
	// headers. (Over a raw socket: amqp091-go itself stops at 33 levels.)
	if qi, err := ch.QueueDeclarePassive(q.Name, false, true, false, false, nil); err != nil || qi.Messages != 1 {
		t.Fatalf("queue holds %d messages (%v), want the accepted one", qi.Messages, err)
	}
	write(t, nc, wire.AppendMethodFrame(nil, 2, &wire.ChannelOpen{}))
	expectMethod(t, r, "channel.open-ok")
	write(t, nc, wire.AppendMethodFrame(nil, 2, &wire.BasicGet{Queue: q.Name, NoAck: true}))
	expectMethod(t, r, "basic.get-ok")
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	h, err := wire.DecodeContentHeader(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := wire.DecodeProperties(h.Properties); err != nil || p.Headers["t"] == nil {
		t.Fatalf("delivered headers: %v %v", p.Headers, err)
	}
}

func TestProbeConnectionLevelFrameErrors(t *testing.T) {
	n := brokertest.Start(t)
	tests := []struct {
		name  string
		bytes []byte
		code  uint16
	}{
		// RabbitMQ: "unexpected method in connection state running".
		{"basic method on channel 0", wire.AppendMethodFrame(nil, 0, &wire.BasicQos{PrefetchCount: 1}), wire.ChannelError},
		{"handshake method after open", wire.AppendMethodFrame(nil, 0, &wire.ConnectionTuneOk{}), wire.ChannelError},
		{"content header on channel 0", wire.AppendHeaderFrame(nil, 0, wire.ClassBasic, 1, nil), wire.UnexpectedFrame},
		{"heartbeat with a payload", []byte{wire.FrameHeartbeat, 0, 0, 0, 0, 0, 2, 'h', 'i', wire.FrameEnd}, wire.FrameError},
		{"heartbeat on channel 1", []byte{wire.FrameHeartbeat, 0, 1, 0, 0, 0, 0, wire.FrameEnd}, wire.FrameError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, r := rawHandshake(t, n.AMQPAddr())
			write(t, nc, tt.bytes)
			if c := readClose(t, r); c.ReplyCode != tt.code {
				t.Fatalf("connection.close %d %q, want %d", c.ReplyCode, c.ReplyText, tt.code)
			}
		})
	}
}

func TestProbeFrameErrorsDuringHandshakeGetConnectionClose(t *testing.T) {
	n := brokertest.Start(t)
	badEnd := wire.AppendMethodFrame(nil, 0, &wire.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	badEnd[len(badEnd)-1] = 0
	tooLarge := binary.BigEndian.AppendUint32([]byte{wire.FrameMethod, 0, 0}, 1<<20)
	tests := []struct {
		name  string
		bytes []byte
	}{
		{"bad frame end", badEnd},
		{"frame over the initial frame max", append(tooLarge, make([]byte, 100)...)},
		{"unknown frame type", []byte{9, 0, 0, 0, 0, 0, 0, wire.FrameEnd}},
		{"heartbeat with a payload", []byte{wire.FrameHeartbeat, 0, 0, 0, 0, 0, 1, 0, wire.FrameEnd}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", n.AMQPAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			r := wire.NewReader(nc, 4096)
			write(t, nc, []byte(wire.ProtocolHeader))
			expectMethod(t, r, "connection.start")
			write(t, nc, tt.bytes)
			if c := readClose(t, r); c.ReplyCode != wire.FrameError {
				t.Fatalf("connection.close %d %q, want %d", c.ReplyCode, c.ReplyText, wire.FrameError)
			}
		})
	}
}

func TestProbeUnauthenticatedConnectionsCostLittle(t *testing.T) {
	const conns = 500
	n := brokertest.Start(t)
	before := heapObjects()
	for range conns {
		nc, err := net.Dial("tcp", n.AMQPAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		write(t, nc, []byte(wire.ProtocolHeader))
		expectMethod(t, wire.NewReader(nc, 4096), "connection.start")
		// start-ok's frame header, declaring the most allowed before
		// tune, and none of its payload.
		write(t, nc, binary.BigEndian.AppendUint32([]byte{wire.FrameMethod, 0, 0}, wire.FrameMinSize-wire.FrameOverhead))
	}
	grown := int64(heapObjects()) - int64(before)
	t.Logf("heap grew by %d KiB for %d unauthenticated connections", grown>>10, conns)
	if grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB for %d unauthenticated connections", grown>>20, conns)
	}
}
