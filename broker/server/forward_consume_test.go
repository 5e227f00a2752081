package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// rawConsumer opens an AMQP connection as guest with a small receive
// buffer, consumes queue q with automatic acks on channel 1, and reads
// nothing after the handshake: the caller decides when to read.
func rawConsumer(t *testing.T, addr, q string) (net.Conn, *wire.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(nc, 64<<10)
	expect := func(want string) wire.Method {
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
	send := func(ch uint16, m wire.Method) {
		t.Helper()
		if _, err := nc.Write(wire.AppendMethodFrame(nil, ch, m)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Write([]byte(wire.ProtocolHeader)); err != nil {
		t.Fatal(err)
	}
	expect("connection.start")
	send(0, &wire.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	expect("connection.tune")
	send(0, &wire.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131072})
	send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	expect("connection.open-ok")
	send(1, &wire.ChannelOpen{})
	expect("channel.open-ok")
	send(1, &wire.BasicConsume{Queue: q, ConsumerTag: "slow", NoAck: true})
	expect("basic.consume-ok")
	_ = nc.SetDeadline(time.Time{})
	return nc, r
}

// readDelivery reads a basic.deliver with its header and body frames and
// returns the body.
func readDelivery(r *wire.Reader) ([]byte, error) {
	f, err := r.ReadFrame()
	if err != nil {
		return nil, err
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil {
		return nil, err
	}
	if _, ok := m.(*wire.BasicDeliver); !ok {
		return nil, fmt.Errorf("got %s, want basic.deliver", m.Name())
	}
	f, err = r.ReadFrame()
	if err != nil {
		return nil, err
	}
	h, err := wire.DecodeContentHeader(f.Payload)
	if err != nil {
		return nil, err
	}
	var body []byte
	for uint64(len(body)) < h.BodySize {
		f, err := r.ReadFrame()
		if err != nil {
			return nil, err
		}
		body = append(body, f.Payload...)
	}
	return body, nil
}

// A client that consumes with automatic acks through a node that does not
// hold the queue, and never reads its socket, leaves the backlog in the
// owner's queue: only a bounded window leaves it (what the sockets and the
// connection's output buffer take, and the forwarding window of 1,000
// deliveries), so the backlog never piles up in the consuming node's
// memory. Once the client reads, it gets every message, once and in order.
func TestAutoAckConsumerThroughAnotherNodeThatDoesNotReadIsHeldBack(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	owner, other := c.Nodes[0], c.Nodes[1]
	if _, err := owner.Channel(t).QueueDeclare("slow", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareOn(t, other, "slow")
	const (
		total    = 4000
		size     = 16 << 10
		window   = 1000     // forward's defaultWindow
		buffered = 16 << 20 // the sockets' buffers and the output limit, generously
		bound    = window + buffered/size
	)
	pub := owner.Channel(t)
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, total))
	for i := range total {
		body := make([]byte, size)
		binary.BigEndian.PutUint64(body, uint64(i))
		if err := pub.PublishWithContext(context.Background(), "", "slow", false, false, amqp091.Publishing{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range total {
		select {
		case cf := <-confirms:
			if !cf.Ack {
				t.Fatalf("message %d nacked", cf.DeliveryTag)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d confirms within 30 s", i, total)
		}
	}

	nc, r := rawConsumer(t, other.AMQPAddr(), "slow")
	depth := func() int { return declareOn(t, owner, "slow").Messages }
	// The owner sends what the window allows, then stops.
	last := -1
	eventually.Succeeds(t, 20*time.Second, "the owner's queue depth settles", func() error {
		d := depth()
		if d == total {
			return fmt.Errorf("nothing delivered yet")
		}
		if d != last {
			last = d
			return fmt.Errorf("depth %d, still moving", d)
		}
		return nil
	})
	eventually.Holds(t, 2*time.Second, "the backlog stays on the owner", func() error {
		if d := depth(); d < total-bound {
			return fmt.Errorf("%d of %d messages left the owner's queue for a client that reads nothing (bound %d)", total-d, total, bound)
		}
		return nil
	})
	t.Logf("%d of %d messages left the owner's queue while the client read nothing", total-depth(), total)

	// The client reads: the credit comes back and every message arrives.
	_ = nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := range total {
		body, err := readDelivery(r)
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		if got := binary.BigEndian.Uint64(body); got != uint64(i) || len(body) != size {
			t.Fatalf("delivery %d: message %d of %d bytes", i, got, len(body))
		}
	}
	if d := depth(); d != 0 {
		t.Fatalf("%d messages left on the owner after every one was received", d)
	}
}

// A consumer through another node with a prefetch of 50 or more has the
// owner read ahead as much again (held on the consumer's node, counted
// unacked by the queue); its client still never holds more than its
// prefetch, gets every message once, in order and not redelivered, and
// what its node held goes back to the queue when it goes. A smaller
// prefetch gets no read-ahead (fair dispatch: prefetch 1 means one
// message a consumer).
func TestPrefetchThroughAnotherNodeReadsAhead(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	cases := []struct {
		queue             string
		prefetch, unacked int
	}{
		{"small", 10, 10},
		{"large", 100, 200},
	}
	for _, tc := range cases {
		t.Run(tc.queue, func(t *testing.T) {
			if _, err := n1.Channel(t).QueueDeclare(tc.queue, true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			declareOn(t, n2, tc.queue)
			pub := n1.Channel(t)
			_ = pub.Confirm(false)
			const total = 1000
			if acked, _, _ := publishCounted(t, pub, tc.queue, 0, total); acked != total {
				t.Fatalf("acked %d of %d", acked, total)
			}
			conn := n2.Dial(t)
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.Qos(tc.prefetch, 0, false); err != nil {
				t.Fatal(err)
			}
			deliveries, err := ch.Consume(tc.queue, "", false, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			next := 0
			take := func(n int) []amqp091.Delivery {
				t.Helper()
				var got []amqp091.Delivery
				for range n {
					select {
					case d := <-deliveries:
						if string(d.Body) != fmt.Sprint(next) || d.Redelivered {
							t.Fatalf("delivery %q redelivered %v, want %d not redelivered", d.Body, d.Redelivered, next)
						}
						next++
						got = append(got, d)
					case <-time.After(10 * time.Second):
						t.Fatalf("%d deliveries within 10 s", len(got))
					}
				}
				return got
			}
			held := take(tc.prefetch)
			select {
			case d := <-deliveries:
				t.Fatalf("delivery %q past the prefetch of %d", d.Body, tc.prefetch)
			case <-time.After(300 * time.Millisecond):
			}
			eventually.Succeeds(t, 10*time.Second, "the owner's counts", func() error {
				if q := declareOn(t, n1, tc.queue); q.Messages != total-tc.unacked {
					return fmt.Errorf("%d ready, want %d (%d unacked)", q.Messages, total-tc.unacked, tc.unacked)
				}
				return nil
			})
			// Acking lets the next ones through, from the read-ahead
			// first.
			for round := 0; round < 3; round++ {
				for _, d := range held {
					if err := d.Ack(false); err != nil {
						t.Fatal(err)
					}
				}
				held = take(tc.prefetch)
			}
			acked := 3 * tc.prefetch
			conn.Close()
			eventually.Succeeds(t, 10*time.Second, "what the consumer's node held back in the queue", func() error {
				if q := declareOn(t, n1, tc.queue); q.Messages != total-acked || q.Consumers != 0 {
					return fmt.Errorf("%d ready %d consumers, want %d and none", q.Messages, q.Consumers, total-acked)
				}
				return nil
			})
		})
	}
}

// A message beyond a consumer's prefetch stays in the queue, where it
// expires (x-message-ttl, or an expiration of its own) and never reaches
// a client, on the owner as through another node: the read-ahead takes
// none of them out. (Found in review: the read-ahead held them on the
// consumer's node and the client got them after their TTL.)
func TestReadAheadKeepsExpiringMessagesInTheQueue(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	cases := []struct {
		name       string
		args       amqp091.Table
		expiration string
	}{
		{"queue-ttl", amqp091.Table{"x-message-ttl": int32(1000)}, ""},
		{"message-expiration", nil, "1000"},
	}
	for _, tc := range cases {
		for _, via := range []struct {
			name string
			node *brokertest.Node
		}{{"owner", n1}, {"another", n2}} {
			t.Run(tc.name+"/"+via.name, func(t *testing.T) {
				q := tc.name + "-" + via.name
				if _, err := n1.Channel(t).QueueDeclare(q, true, false, false, false, tc.args); err != nil {
					t.Fatal(err)
				}
				declareOn(t, via.node, q)
				pub := n1.Channel(t)
				const total, prefetch = 200, 50
				for i := range total {
					if err := pub.PublishWithContext(context.Background(), "", q, false, false, amqp091.Publishing{Body: []byte(fmt.Sprint(i)), Expiration: tc.expiration}); err != nil {
						t.Fatal(err)
					}
				}
				ch := via.node.Channel(t)
				if err := ch.Qos(prefetch, 0, false); err != nil {
					t.Fatal(err)
				}
				deliveries, err := ch.Consume(q, "", false, false, false, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				var last amqp091.Delivery
				for i := range prefetch {
					select {
					case last = <-deliveries:
					case <-time.After(10 * time.Second):
						t.Fatalf("%d deliveries within 10 s", i)
					}
				}
				time.Sleep(1500 * time.Millisecond) // the others expire meanwhile
				if err := last.Ack(true); err != nil {
					t.Fatal(err)
				}
				select {
				case d := <-deliveries:
					t.Fatalf("message %s delivered after its TTL had passed", d.Body)
				case <-time.After(time.Second):
				}
			})
		}
	}
}
