package server_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// declareOn waits until node n knows queue q (its metadata applied) and
// returns its passive declare.
func declareOn(t *testing.T, n *brokertest.Node, q string) amqp091.Queue {
	t.Helper()
	var got amqp091.Queue
	eventually.Succeeds(t, 10*time.Second, "the queue known on "+n.Cfg.Cluster.NodeName, func() error {
		ch, err := n.Dial(t).Channel()
		if err != nil {
			return err
		}
		defer ch.Close()
		got, err = ch.QueueDeclarePassive(q, true, false, false, false, nil)
		return err
	})
	return got
}

// publishCounted publishes n persistent messages body-numbered from
// first on ch (in confirm mode, mandatory) and returns how many were
// acked and nacked, and how many came back returned.
func publishCounted(t *testing.T, ch *amqp091.Channel, q string, first, n int) (acked, nacked, returned int) {
	t.Helper()
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	returns := ch.NotifyReturn(make(chan amqp091.Return, n))
	ctx := context.Background()
	for i := first; i < first+n; i++ {
		if err := ch.PublishWithContext(ctx, "", q, true, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case c := <-confirms:
			if c.Ack {
				acked++
			} else {
				nacked++
			}
		case <-timeout:
			t.Fatalf("%d of %d confirms within 30 s", acked+nacked, n)
		}
	}
	for len(returns) > 0 {
		<-returns
		returned++
	}
	return acked, nacked, returned
}

func TestPublishThroughANodeThatDoesNotHoldTheQueue(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n1, n3 := c.Nodes[0], c.Nodes[2]
	owner := c.Nodes[1].Channel(t)
	if _, err := owner.QueueDeclare("orders", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareOn(t, n1, "orders")

	// Publish on n1 to the queue on n2: every message confirmed, none
	// returned (a remote queue is a route).
	pub := n1.Channel(t)
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const total = 3000
	if acked, nacked, returned := publishCounted(t, pub, "orders", 0, total); acked != total || returned != 0 {
		t.Fatalf("acked %d nacked %d returned %d of %d", acked, nacked, returned, total)
	}
	// Declare on a third node answers with the owner's counts.
	if q := declareOn(t, n3, "orders"); q.Messages != total {
		t.Fatalf("declare on n3: %d messages, want %d", q.Messages, total)
	}
	// Declare that differs is refused from the record.
	if _, err := n3.Channel(t).QueueDeclare("orders", false, false, false, false, nil); !isAMQP(err, amqp091.PreconditionFailed) {
		t.Fatalf("inequivalent declare on n3: %v", err)
	}

	// basic.get through n3, with an ack; then a get that is requeued comes
	// back redelivered.
	get := n3.Channel(t)
	d, ok, err := get.Get("orders", false)
	if err != nil || !ok || string(d.Body) != "0" {
		t.Fatalf("get through n3: %q %v %v", d.Body, ok, err)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
	d, _, _ = get.Get("orders", false)
	if string(d.Body) != "1" {
		t.Fatalf("second get: %q", d.Body)
	}
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 5*time.Second, "the requeued message back first, redelivered", func() error {
		d, ok, err := get.Get("orders", true)
		if err != nil || !ok {
			return fmt.Errorf("get: %v %v", ok, err)
		}
		if string(d.Body) != "1" || !d.Redelivered {
			return fmt.Errorf("got %q redelivered %v", d.Body, d.Redelivered)
		}
		return nil
	})

	// The owner's consumer gets the rest, each once, in order.
	deliveries, err := owner.Consume("orders", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i < total; i++ {
		select {
		case d := <-deliveries:
			if string(d.Body) != strconv.Itoa(i) {
				t.Fatalf("delivery %d: %q", i, d.Body)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("delivery %d missing", i)
		}
	}
	if err := owner.Cancel("", false); err != nil {
		t.Logf("cancel: %v", err)
	}
}

func TestPurgeAndDeleteThroughAnotherNode(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	n1 := c.Nodes[0]
	if _, err := c.Nodes[1].Channel(t).QueueDeclare("jobs", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareOn(t, n1, "jobs")
	pub := n1.Channel(t)
	_ = pub.Confirm(false)
	if acked, _, _ := publishCounted(t, pub, "jobs", 0, 10); acked != 10 {
		t.Fatalf("acked %d", acked)
	}
	if _, err := n1.Channel(t).QueueDelete("jobs", false, true, false); !isAMQP(err, amqp091.PreconditionFailed) {
		t.Fatalf("delete if-empty of a queue holding 10 through n1: %v", err)
	}
	if n, err := n1.Channel(t).QueuePurge("jobs", false); err != nil || n != 10 {
		t.Fatalf("purge through n1: %d %v", n, err)
	}
	if _, err := n1.Channel(t).QueueDelete("jobs", false, true, false); err != nil {
		t.Fatalf("delete if-empty of an empty queue through n1: %v", err)
	}
	eventually.Succeeds(t, 5*time.Second, "the queue gone on its node", func() error {
		_, err := c.Nodes[1].Dial(t).Channel()
		if err != nil {
			return err
		}
		if _, ok := c.Nodes[1].Vhost("/"); !ok {
			return errors.New("no vhost")
		}
		v, _ := c.Nodes[1].Vhost("/")
		if _, err := v.LocalQueue("jobs"); err == nil {
			return errors.New("n2 still holds jobs")
		}
		return nil
	})
}

func TestOwnerDownNacksPublishesAndDeclareIsNotFound(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n1 := c.Nodes[0]
	if _, err := c.Nodes[2].Channel(t).QueueDeclare("held", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareOn(t, n1, "held")
	c.Stop(2)

	pub := n1.Channel(t)
	_ = pub.Confirm(false)
	if acked, nacked, returned := publishCounted(t, pub, "held", 0, 5); acked != 0 || nacked != 5 || returned != 0 {
		t.Fatalf("with the owner down: acked %d nacked %d returned %d, want 5 nacked", acked, nacked, returned)
	}
	_, err := n1.Channel(t).QueueDeclarePassive("held", true, false, false, false, nil)
	want := "NOT_FOUND - home node 'warren@n3' of durable queue 'held' in vhost '/' is down or inaccessible"
	var aerr *amqp091.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp091.NotFound || aerr.Reason != want {
		t.Fatalf("passive declare with the owner down: %v, want %q", err, want)
	}
	if _, err := n1.Channel(t).QueueDeclare("held", true, false, false, false, nil); !isAMQP(err, amqp091.NotFound) {
		t.Fatalf("declare with the owner down: %v", err)
	}

	c.Restart(2)
	eventually.Succeeds(t, 15*time.Second, "publishes confirmed again", func() error {
		ch, err := n1.Dial(t).Channel()
		if err != nil {
			return err
		}
		defer ch.Close()
		_ = ch.Confirm(false)
		if acked, nacked, _ := publishCounted(t, ch, "held", 100, 1); acked != 1 {
			return fmt.Errorf("acked %d nacked %d", acked, nacked)
		}
		return nil
	})
}

func isAMQP(err error, code int) bool {
	var aerr *amqp091.Error
	return errors.As(err, &aerr) && aerr.Code == code
}

func TestConsumeThroughANodeThatDoesNotHoldTheQueue(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n1, n3 := c.Nodes[0], c.Nodes[2]
	if _, err := c.Nodes[1].Channel(t).QueueDeclare("work", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareOn(t, n1, "work")
	declareOn(t, n3, "work")
	pub := n1.Channel(t)
	_ = pub.Confirm(false)
	const total = 2000
	if acked, _, _ := publishCounted(t, pub, "work", 0, total); acked != total {
		t.Fatalf("acked %d of %d", acked, total)
	}

	// A consumer on n3 with prefetch 10 gets at most 10 unacked.
	conn := n3.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("work", "c1", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var first []amqp091.Delivery
	for range 10 {
		select {
		case d := <-deliveries:
			first = append(first, d)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d deliveries within 10 s", len(first))
		}
	}
	select {
	case d := <-deliveries:
		t.Fatalf("an 11th delivery (%q) with prefetch 10 and nothing acked", d.Body)
	case <-time.After(300 * time.Millisecond):
	}
	for i, d := range first {
		if string(d.Body) != strconv.Itoa(i) || d.Redelivered {
			t.Fatalf("delivery %d: %q redelivered %v", i, d.Body, d.Redelivered)
		}
	}
	// Requeue the first one: it comes back redelivered; ack the rest and
	// every message arrives once, in order.
	if err := first[0].Nack(false, true); err != nil {
		t.Fatal(err)
	}
	for _, d := range first[1:] {
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	next := 10
	for len(seen) < total-9 {
		select {
		case d := <-deliveries:
			seen[string(d.Body)]++
			if string(d.Body) == "0" {
				if !d.Redelivered {
					t.Fatal("the requeued message not marked redelivered")
				}
			} else {
				if string(d.Body) != strconv.Itoa(next) {
					t.Fatalf("delivery %q, want %d", d.Body, next)
				}
				next++
			}
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d messages within 10 s", len(seen), total-9)
		}
	}
	for b, n := range seen {
		if n != 1 {
			t.Fatalf("message %q delivered %d times", b, n)
		}
	}

	// Closing the consumer's connection with messages unacked requeues
	// them on the owner.
	if acked, _, _ := publishCounted(t, pub, "work", total, 5); acked != 5 {
		t.Fatal("publish")
	}
	for range 5 {
		<-deliveries
	}
	conn.Close()
	eventually.Succeeds(t, 10*time.Second, "the unacked messages back in the queue", func() error {
		if q := declareOn(t, n1, "work"); q.Messages != 5 || q.Consumers != 0 {
			return fmt.Errorf("%d messages %d consumers", q.Messages, q.Consumers)
		}
		return nil
	})
}

func TestOwnerDownCancelsConsumersOnOtherNodes(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	n1 := c.Nodes[0]
	if _, err := c.Nodes[1].Channel(t).QueueDeclare("held", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareOn(t, n1, "held")
	ch := n1.Channel(t)
	cancels := ch.NotifyCancel(make(chan string, 1))
	if _, err := ch.Consume("held", "c1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	select {
	case tag := <-cancels:
		if tag != "c1" {
			t.Fatalf("cancelled %q", tag)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no basic.cancel within 15 s of the owner stopping")
	}
}

func TestDeadLettersReachAQueueOnAnotherNode(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	if _, err := n2.Channel(t).QueueDeclare("dead", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	src := n1.Channel(t)
	if _, err := src.QueueDeclare("src", true, false, false, false, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"}); err != nil {
		t.Fatal(err)
	}
	declareOn(t, n1, "dead")
	declareOn(t, n3, "src")
	// Published on n3, held on n1, rejected there: dead-lettered to n2.
	pub := n3.Channel(t)
	_ = pub.Confirm(false)
	if acked, _, _ := publishCounted(t, pub, "src", 0, 3); acked != 3 {
		t.Fatal("publish")
	}
	for range 3 {
		d, ok, err := src.Get("src", false)
		if err != nil || !ok {
			t.Fatalf("get: %v %v", ok, err)
		}
		if err := d.Reject(false); err != nil {
			t.Fatal(err)
		}
	}
	eventually.Succeeds(t, 10*time.Second, "three dead letters on n2", func() error {
		if q := declareOn(t, n3, "dead"); q.Messages != 3 {
			return fmt.Errorf("%d dead letters", q.Messages)
		}
		return nil
	})
	// A consumer on n2 in use: delete if-unused through n3 is refused.
	if _, err := n2.Channel(t).Consume("dead", "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := n3.Channel(t).QueueDelete("dead", true, false, false); !isAMQP(err, amqp091.PreconditionFailed) {
		t.Fatalf("delete if-unused of a queue in use, through another node: %v", err)
	}
}

func TestMessagesGotThroughANodeThatStopsGoBackToTheQueue(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n1, n3 := c.Nodes[0], c.Nodes[2]
	if _, err := c.Nodes[1].Channel(t).QueueDeclare("taken", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareOn(t, n3, "taken")
	pub := n1.Channel(t)
	_ = pub.Confirm(false)
	if acked, _, _ := publishCounted(t, pub, "taken", 0, 2); acked != 2 {
		t.Fatal("publish")
	}
	ch := n3.Channel(t)
	if _, ok, err := ch.Get("taken", false); !ok || err != nil {
		t.Fatalf("get: %v %v", ok, err)
	}
	if _, err := ch.Consume("taken", "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 5*time.Second, "both messages taken through n3", func() error {
		if q := declareOn(t, n1, "taken"); q.Messages != 0 {
			return fmt.Errorf("%d ready", q.Messages)
		}
		return nil
	})
	c.Stop(2)
	eventually.Succeeds(t, 10*time.Second, "both messages ready again", func() error {
		if q := declareOn(t, n1, "taken"); q.Messages != 2 || q.Consumers != 0 {
			return fmt.Errorf("%d ready, %d consumers", q.Messages, q.Consumers)
		}
		return nil
	})
}

func TestStreamConsumeThroughAnotherNodeNamesItsNode(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	if _, err := c.Nodes[1].Channel(t).QueueDeclare("events", true, false, false, false, amqp091.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	declareOn(t, c.Nodes[0], "events")
	ch := c.Nodes[0].Channel(t)
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	_, err := ch.Consume("events", "", false, false, false, false, nil)
	var aerr *amqp091.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp091.NotImplemented || !strings.Contains(aerr.Reason, "warren@n2") {
		t.Fatalf("consume a stream through another node: %v, want 540 naming warren@n2", err)
	}
}

// A consumer on another node that cancels while deliveries are on their
// way keeps what it received (AMQP: unacked messages stay the channel's)
// and acks it afterwards: nothing it holds is handed to anyone else, and
// every message is consumed exactly once.
func TestCancelThroughAnotherNodeKeepsWhatTheClientHolds(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	if _, err := c.Nodes[0].Channel(t).QueueDeclare("jobs", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	declareOn(t, c.Nodes[1], "jobs")
	pub := c.Nodes[0].Channel(t)
	_ = pub.Confirm(false)
	const total = 500
	if acked, _, _ := publishCounted(t, pub, "jobs", 0, total); acked != total {
		t.Fatalf("acked %d of %d", acked, total)
	}
	seen := map[string]int{}
	ch := c.Nodes[1].Channel(t)
	if err := ch.Qos(200, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("jobs", "remote", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var held []amqp091.Delivery
	for len(held) < 50 {
		select {
		case d := <-deliveries:
			held = append(held, d)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d deliveries within 10 s", len(held))
		}
	}
	if err := ch.Cancel("remote", false); err != nil {
		t.Fatal(err)
	}
	for d := range deliveries { // what was already on its way, until the cancel-ok
		held = append(held, d)
	}
	// Meanwhile another consumer on the owner takes the rest; none of the
	// held messages may reach it.
	own := c.Nodes[0].Channel(t)
	rest, err := own.Consume("jobs", "owner", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range held {
		seen[string(d.Body)]++
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	for len(seen) < total {
		select {
		case d := <-rest:
			seen[string(d.Body)]++
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d messages consumed (held %d)", len(seen), total, len(held))
		}
	}
	for body, n := range seen {
		if n != 1 {
			t.Fatalf("message %s consumed %d times (held %d by the cancelled consumer)", body, n, len(held))
		}
	}
	eventually.Succeeds(t, 10*time.Second, "the queue empty", func() error {
		if q := declareOn(t, c.Nodes[0], "jobs"); q.Messages != 0 {
			return fmt.Errorf("%d messages left", q.Messages)
		}
		return nil
	})
}
