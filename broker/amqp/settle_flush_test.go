package amqp_test

import (
	"errors"
	"net"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/brokertest"
)

// While the reader settles acks, the deliveries they give credit for wait
// for the reader's flush (conn.settleWaking): it must come before the
// reader handles anything but another settlement and before it waits for
// the socket, also when what is buffered is the start of a frame.
func TestDeliveriesForAcksAreFlushedBeforeTheReaderWaits(t *testing.T) {
	n := brokertest.Start(t)
	pub := n.Channel(t)
	for _, q := range []struct {
		name string
		args amqp091.Table
	}{
		{"stream", amqp091.Table{"x-queue-type": "stream"}},
		{"classic", nil},
	} {
		t.Run(q.name, func(t *testing.T) {
			name := "settle-flush-" + q.name
			if _, err := pub.QueueDeclare(name, true, false, false, false, q.args); err != nil {
				t.Fatal(err)
			}
			publishConfirmed(t, pub, "", name, bodies(6, "m"), false)

			nc, r := rawHandshake(t, n.AMQPAddr())
			write := func(b []byte) {
				t.Helper()
				if _, err := nc.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			write(wire.AppendMethodFrame(nil, 1, &wire.ChannelOpen{}))
			expectMethod(t, r, "channel.open-ok")
			write(wire.AppendMethodFrame(nil, 1, &wire.BasicQos{PrefetchCount: 2}))
			expectMethod(t, r, "basic.qos-ok")
			var args wire.Table
			if q.args != nil {
				args = wire.Table{"x-stream-offset": "first"}
			}
			write(wire.AppendMethodFrame(nil, 1, &wire.BasicConsume{Queue: name, ConsumerTag: "c", Arguments: args}))
			expectMethod(t, r, "basic.consume-ok")
			ack := func(tag uint64) []byte {
				return wire.AppendMethodFrame(nil, 1, &wire.BasicAck{DeliveryTag: tag})
			}

			// Prefetch 2: each ack's credit brings the next message.
			expectDelivery(t, r, 1)
			expectDelivery(t, r, 2)
			// An ack and the first bytes of the next: the reader must flush
			// the delivery for the first before it waits for the rest.
			next := ack(2)
			write(append(ack(1), next[:5]...))
			expectDelivery(t, r, 3)
			write(next[5:])
			expectDelivery(t, r, 4)
			// Two acks in one write: the deliveries for both come out.
			write(append(ack(3), ack(4)...))
			expectDelivery(t, r, 5)
			expectDelivery(t, r, 6)
		})
	}
}

func expectMethod(t *testing.T, r *wire.Reader, want string) wire.Method {
	t.Helper()
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatalf("waiting for %s: %v", want, err)
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil || m.Name() != want {
		t.Fatalf("got %v (%v), want %s", m, err, want)
	}
	return m
}

// expectDelivery reads basic.deliver with its header and body frames.
func expectDelivery(t *testing.T, r *wire.Reader, tag uint64) {
	t.Helper()
	m := expectMethod(t, r, "basic.deliver").(*wire.BasicDeliver)
	if m.DeliveryTag != tag {
		t.Fatalf("delivery tag %d, want %d", m.DeliveryTag, tag)
	}
	for _, typ := range []byte{wire.FrameHeader, wire.FrameBody} {
		f, err := r.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("delivery %d: content frames never came (the output was not flushed)", tag)
			}
			t.Fatalf("delivery %d: %v", tag, err)
		}
		if f.Type != typ {
			t.Fatalf("delivery %d: frame type %d, want %d", tag, f.Type, typ)
		}
	}
}
