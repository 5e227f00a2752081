package server_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/server"
)

// queueRec is vhost /'s record of name on n, if any.
func queueRec(n *brokertest.Node, name string) (meta.Queue, bool) {
	for _, q := range n.Meta().Queues("/") {
		if q.Name == name {
			return q, true
		}
	}
	return meta.Queue{}, false
}

// An exclusive queue lives on the node of the connection that declared it
// and goes with that connection: when the connection closes, and when its
// node goes down (the other members drop its record, as RabbitMQ deletes
// a down node's exclusive queues), so its owner can reconnect to another
// node and declare it again.
func TestExclusiveQueueFollowsItsConnection(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n1, n2 := c.Nodes[0], c.Nodes[1]

	conn := n2.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 5*time.Second, "n1 sees the exclusive queue on n2", func() error {
		rec, ok := queueRec(n1, q.Name)
		if !ok || rec.Node != "warren@n2" || rec.Owner == nil || rec.Owner.Node != "warren@n2" {
			return fmt.Errorf("record %+v %v", rec, ok)
		}
		return nil
	})
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 5*time.Second, "the closed connection's queue is gone everywhere", func() error {
		for _, n := range c.Nodes {
			if _, ok := queueRec(n, q.Name); ok {
				return fmt.Errorf("%s still has %s", n.Cfg.Cluster.NodeName, q.Name)
			}
		}
		return nil
	})

	// Its node goes down with the connection open.
	ch2 := n2.Channel(t)
	if _, err := ch2.QueueDeclare("mine-alone", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch2.QueueDeclare("durable-kept", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 5*time.Second, "n1 sees both queues", func() error {
		if _, ok := queueRec(n1, "mine-alone"); !ok {
			return fmt.Errorf("no mine-alone")
		}
		if _, ok := queueRec(n1, "durable-kept"); !ok {
			return fmt.Errorf("no durable-kept")
		}
		return nil
	})
	n2.CutClusterLink()
	eventually.Succeeds(t, 30*time.Second, "the down node's exclusive queue is dropped", func() error {
		if _, ok := queueRec(n1, "mine-alone"); ok {
			return fmt.Errorf("n1 still has mine-alone")
		}
		return nil
	})
	if _, ok := queueRec(n1, "durable-kept"); !ok {
		t.Error("the down node's durable queue was dropped too")
	}
	// Its client declares it again through another node.
	if _, err := n1.Channel(t).QueueDeclare("mine-alone", false, false, true, false, nil); err != nil {
		t.Errorf("declare the exclusive queue again on n1: %v", err)
	}
}

// An auto-delete queue whose last consumer, on another node (consuming
// through forwarding), cancels is deleted, on every node.
func TestAutoDeleteQueueGoesWithItsLastRemoteConsumer(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	ch1 := n1.Channel(t)
	if _, err := ch1.QueueDeclare("ad", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "n2 knows ad", func() bool { _, ok := queueRec(n2, "ad"); return ok })
	ch2 := n2.Channel(t)
	msgs, err := ch2.Consume("ad", "remote", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch1.Publish("", "ad", false, false, amqp091.Publishing{Body: []byte("hop")}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-msgs:
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery through n2")
	}
	if err := ch2.Cancel("remote", false); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 10*time.Second, "ad is deleted on every node", func() error {
		for _, n := range c.Nodes {
			if _, ok := queueRec(n, "ad"); ok {
				return fmt.Errorf("%s still has ad", n.Cfg.Cluster.NodeName)
			}
		}
		return nil
	})
}

// queue.delete of a queue whose node is down does as RabbitMQ's classic
// queues: with if-empty it is refused (406: the queue may hold messages)
// and kept; otherwise (if-unused included: nobody can be using it) the
// record is deleted, with a warning, and delete-ok counts no message. The
// node back, the deleted queues are gone there too and the kept one still
// has its message.
func TestDeleteOfAQueueWhoseNodeIsDown(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n1, n3 := c.Nodes[0], c.Nodes[2]
	ch3 := n3.Channel(t)
	names := []string{"if-empty", "if-unused", "plain"}
	for _, name := range names {
		if _, err := ch3.QueueDeclare(name, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch3.Publish("", name, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
	eventually.Succeeds(t, 5*time.Second, "each queue has its message", func() error {
		for _, name := range names {
			if q, err := ch3.QueueDeclarePassive(name, true, false, false, false, nil); err != nil || q.Messages != 1 {
				return fmt.Errorf("%s: %+v %v", name, q, err)
			}
		}
		return nil
	})
	c.Stop(2)
	eventually.True(t, 10*time.Second, "n1 sees n3 down", func() bool {
		for _, m := range statusOf(t, n1).Nodes {
			if m.Name == "warren@n3" {
				return !m.Running
			}
		}
		return false
	})
	for _, tc := range []struct {
		name              string
		ifUnused, ifEmpty bool
		code              int
	}{
		{"if-empty", false, true, amqp091.PreconditionFailed},
		{"if-unused", true, false, 0},
		{"plain", false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := n1.Channel(t)
			n, err := ch.QueueDelete(tc.name, tc.ifUnused, tc.ifEmpty, false)
			if tc.code != 0 {
				var ae *amqp091.Error
				if !errors.As(err, &ae) || ae.Code != tc.code {
					t.Fatalf("delete: %v, want code %d", err, tc.code)
				}
				if _, ok := queueRec(n1, tc.name); !ok {
					t.Error("the refused delete removed the record")
				}
				return
			}
			if err != nil || n != 0 {
				t.Fatalf("delete: %d %v", n, err)
			}
			if _, ok := queueRec(n1, tc.name); ok {
				t.Error("the record is still there")
			}
		})
	}
	back := c.Restart(2)
	for _, name := range []string{"if-unused", "plain"} {
		if _, ok := queueRec(back, name); ok {
			t.Errorf("%s came back with its node", name)
		}
	}
	q, err := back.Channel(t).QueueDeclarePassive("if-empty", true, false, false, false, nil)
	if err != nil || q.Messages != 1 {
		t.Errorf("the kept queue after its node is back: %+v %v", q, err)
	}
}

// Dead letters routed to a queue whose node is down are dropped, as
// RabbitMQ drops them for classic queues, and counted: the vhost's
// DeadLettersDropped and warren_dead_letters_dropped_total on /metrics
// say how many.
func TestDeadLettersToAQueueWhoseNodeIsDownAreCounted(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n1, n3 := c.Nodes[0], c.Nodes[2]
	if _, err := n3.Channel(t).QueueDeclare("dlq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ch := n1.Channel(t)
	if _, err := ch.QueueDeclare("src", true, false, false, false, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "n1 knows dlq", func() bool { _, ok := queueRec(n1, "dlq"); return ok })
	c.Stop(2)
	eventually.True(t, 10*time.Second, "n1 sees n3 down", func() bool {
		for _, m := range statusOf(t, n1).Nodes {
			if m.Name == "warren@n3" {
				return !m.Running
			}
		}
		return false
	})
	for range 3 {
		if err := ch.Publish("", "src", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; {
		d, ok, err := ch.Get("src", false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		if err := d.Reject(false); err != nil {
			t.Fatal(err)
		}
		i++
	}
	v, _ := n1.Vhost("/")
	eventually.Succeeds(t, 10*time.Second, "three dead letters counted as dropped", func() error {
		if n := v.DeadLettersDropped(); n != 3 {
			return fmt.Errorf("%d dropped", n)
		}
		return nil
	})
	resp, err := http.Get("http://" + n1.Addr(server.ListenerPrometheus).String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `warren_dead_letters_dropped_total{vhost="/"} 3`) {
		t.Errorf("/metrics does not count them:\n%s", grepLines(string(body), "dead_letters"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
