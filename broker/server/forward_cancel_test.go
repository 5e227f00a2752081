package server_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// basic.cancel of an automatic-ack consumer through a node that does not
// hold the queue, while up to a window of deliveries is on its way to a
// client that reads slowly, loses nothing: the client receives, before
// cancel-ok, every message the owner's queue handed out, and the rest is
// still in the queue (as RabbitMQ's channel delivers what its queue
// handed it).
func TestCancelAutoAckConsumerThroughAnotherNodeLosesNoMessage(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	owner, other := c.Nodes[0], c.Nodes[1]
	if _, err := owner.Channel(t).QueueDeclare("slow", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareOn(t, other, "slow")
	const (
		total = 4000
		size  = 16 << 10
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
	// At least a window on its way to or held for a client that reads
	// nothing (forward's autoAckWindowBytes, 4 MiB: 256 of these 16 KiB
	// messages, and what the client's socket holds).
	eventually.Succeeds(t, 20*time.Second, "a window left the owner's queue", func() error {
		if d := depth(); d > total-250 {
			return fmt.Errorf("depth %d", d)
		}
		return nil
	})
	if _, err := nc.Write(wire.AppendMethodFrame(nil, 1, &wire.BasicCancel{ConsumerTag: "slow"})); err != nil {
		t.Fatal(err)
	}
	// Read until cancel-ok: deliveries, in the queue's order.
	_ = nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	received := 0
	for {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("after %d deliveries: %v", received, err)
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			t.Fatalf("after %d deliveries: %v", received, err)
		}
		if _, ok := m.(*wire.BasicCancelOk); ok {
			break
		}
		if _, ok := m.(*wire.BasicDeliver); !ok {
			t.Fatalf("after %d deliveries: got %s", received, m.Name())
		}
		body, err := readBody(r)
		if err != nil {
			t.Fatalf("delivery %d: %v", received, err)
		}
		if got := binary.BigEndian.Uint64(body); got != uint64(received) {
			t.Fatalf("delivery %d is message %d", received, got)
		}
		received++
	}
	// Every message was either received or is still in the queue (the
	// queue's count may lag a moment: within a few seconds).
	eventually.Succeeds(t, 10*time.Second, "no message lost at basic.cancel", func() error {
		if left := depth(); received+left != total {
			return fmt.Errorf("%d received + %d left in the queue = %d of %d published", received, left, received+left, total)
		}
		return nil
	})
	t.Logf("%d received before cancel-ok", received)
}

// readBody reads a delivery's content header and body frames.
func readBody(r *wire.Reader) ([]byte, error) {
	f, err := r.ReadFrame()
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
