package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/meta"
)

// amqpCode is the reply code of an AMQP error (0 when err is not one).
func amqpCode(err error) (int, string) {
	var ae *amqp091.Error
	if errors.As(err, &ae) {
		return ae.Code, ae.Reason
	}
	return 0, ""
}

// getOne takes a message from q, waiting up to 5 s for one to arrive.
func getOne(t *testing.T, ch *amqp091.Channel, q string) amqp091.Delivery {
	t.Helper()
	var d amqp091.Delivery
	eventually.Succeeds(t, 5*time.Second, "a message in "+q, func() error {
		got, ok, err := ch.Get(q, true)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("queue empty")
		}
		d = got
		return nil
	})
	return d
}

// A change written to the metadata store, as another node's write would
// arrive, takes effect in the node's routing and queues.
func TestMetadataWritesDriveTheVhost(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// write changes the metadata directly; the node already has a
		// durable queue "q".
		write func(m meta.Store) error
		// check asserts what a client sees afterwards.
		check func(t *testing.T, n *brokertest.Node, ch *amqp091.Channel)
	}{
		{"binding put routes a publish to the queue",
			func(m meta.Store) error {
				return m.PutBinding(ctx, meta.Binding{Vhost: "/", Source: "amq.direct", Destination: "q", DestinationType: "queue", RoutingKey: "k"})
			},
			func(t *testing.T, n *brokertest.Node, ch *amqp091.Channel) {
				if err := ch.Publish("amq.direct", "k", false, false, amqp091.Publishing{Body: []byte("via meta")}); err != nil {
					t.Fatal(err)
				}
				if d := getOne(t, ch, "q"); string(d.Body) != "via meta" {
					t.Fatalf("got %q", d.Body)
				}
			}},
		{"exchange put is declared, and its binding routes",
			func(m meta.Store) error {
				if _, err := m.DeclareExchange(ctx, meta.Exchange{Vhost: "/", Name: "fx", Type: "fanout", Durable: true}); err != nil {
					return err
				}
				return m.PutBinding(ctx, meta.Binding{Vhost: "/", Source: "fx", Destination: "q", DestinationType: "queue"})
			},
			func(t *testing.T, n *brokertest.Node, ch *amqp091.Channel) {
				if err := ch.ExchangeDeclarePassive("fx", "fanout", true, false, false, false, nil); err != nil {
					t.Fatalf("passive declare of the exchange meta made: %v", err)
				}
				if err := ch.Publish("fx", "any", false, false, amqp091.Publishing{Body: []byte("fanned")}); err != nil {
					t.Fatal(err)
				}
				if d := getOne(t, ch, "q"); string(d.Body) != "fanned" {
					t.Fatalf("got %q", d.Body)
				}
			}},
		{"queue put on this node is opened",
			func(m meta.Store) error {
				return m.PutQueue(ctx, meta.Queue{Vhost: "/", Name: "made-by-meta", Type: "classic", Durable: true, Node: "warren@test"})
			},
			func(t *testing.T, n *brokertest.Node, ch *amqp091.Channel) {
				if err := ch.Publish("", "made-by-meta", false, false, amqp091.Publishing{Body: []byte("hello")}); err != nil {
					t.Fatal(err)
				}
				if d := getOne(t, ch, "made-by-meta"); string(d.Body) != "hello" {
					t.Fatalf("got %q", d.Body)
				}
			}},
		{"binding deleted stops routing",
			func(m meta.Store) error {
				b := meta.Binding{Vhost: "/", Source: "amq.direct", Destination: "q", DestinationType: "queue", RoutingKey: "k"}
				if err := m.PutBinding(ctx, b); err != nil {
					return err
				}
				return m.DeleteBinding(ctx, b)
			},
			func(t *testing.T, n *brokertest.Node, ch *amqp091.Channel) {
				returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
				if err := ch.Publish("amq.direct", "k", true, false, amqp091.Publishing{Body: []byte("nowhere")}); err != nil {
					t.Fatal(err)
				}
				select {
				case r := <-returns:
					if r.ReplyCode != 312 {
						t.Fatalf("returned with %d %s, want 312 NO_ROUTE", r.ReplyCode, r.ReplyText)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("a mandatory publish to the unbound key was not returned")
				}
			}},
		{"queue deleted closes it and cancels its consumer",
			nil, // written in check, with a consumer attached first
			func(t *testing.T, n *brokertest.Node, ch *amqp091.Channel) {
				cancels := ch.NotifyCancel(make(chan string, 1))
				if _, err := ch.Consume("q", "c1", false, false, false, false, nil); err != nil {
					t.Fatal(err)
				}
				if err := n.Meta().DeleteQueue(ctx, "/", "q"); err != nil {
					t.Fatal(err)
				}
				select {
				case tag := <-cancels:
					if tag != "c1" {
						t.Fatalf("cancelled %q", tag)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the consumer was not cancelled when meta deleted its queue")
				}
				_, err := ch.QueueDeclarePassive("q", true, false, false, false, nil)
				if code, _ := amqpCode(err); code != 404 {
					t.Fatalf("passive declare after the delete: %v, want 404", err)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := brokertest.Start(t)
			ch := n.Channel(t)
			if _, err := ch.QueueDeclare("q", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if c.write != nil {
				if err := c.write(n.Meta()); err != nil {
					t.Fatalf("meta write: %v", err)
				}
			}
			c.check(t, n, ch)
		})
	}
}

// A queue the metadata places on another node is known (its name is
// taken) but is not opened here: with its node unreachable, using it
// answers as RabbitMQ does (404 naming the home node) and a publish
// routed to it is nacked: never a panic or a silent drop.
func TestQueueOnAnotherNode(t *testing.T) {
	ctx := context.Background()
	homeDown := "NOT_FOUND - home node 'warren@elsewhere' of durable queue 'far' in vhost '/' is down or inaccessible"
	cases := []struct {
		name      string
		use       func(ch *amqp091.Channel) error
		code      int
		reasonHas string
	}{
		{"passive declare", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("far", true, false, false, false, nil)
			return err
		}, 404, homeDown},
		{"basic.get", func(ch *amqp091.Channel) error {
			_, _, err := ch.Get("far", true)
			return err
		}, 404, homeDown},
		{"consume", func(ch *amqp091.Channel) error {
			_, err := ch.Consume("far", "", true, false, false, false, nil)
			return err
		}, 404, homeDown},
		{"publish routed to it", func(ch *amqp091.Channel) error {
			if err := ch.Confirm(false); err != nil {
				return err
			}
			confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
			if err := ch.Publish("", "far", true, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
				return err
			}
			select {
			case c := <-confirms:
				if c.Ack {
					return errors.New("confirmed a message its queue's node never took")
				}
			case <-time.After(10 * time.Second):
				return errors.New("no confirm within 10 s")
			}
			return &amqp091.Error{Code: 0, Reason: "nacked"}
		}, 0, "nacked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := brokertest.Start(t)
			if err := n.Meta().PutQueue(ctx, meta.Queue{Vhost: "/", Name: "far", Type: "classic", Durable: true, Node: "warren@elsewhere"}); err != nil {
				t.Fatal(err)
			}
			ch := n.Channel(t)
			err := c.use(ch)
			var aerr *amqp091.Error
			if !errors.As(err, &aerr) || aerr.Code != c.code || !strings.Contains(aerr.Reason, c.reasonHas) {
				t.Fatalf("using a queue on another node: %v; want %d %q", err, c.code, c.reasonHas)
			}
			// The node still serves: a new connection declares and uses a queue.
			ch2 := n.Channel(t)
			q, err := ch2.QueueDeclare("", false, true, true, false, nil)
			if err != nil {
				t.Fatalf("declare after the refusal: %v", err)
			}
			if err := ch2.Publish("", q.Name, false, false, amqp091.Publishing{Body: []byte("ok")}); err != nil {
				t.Fatal(err)
			}
			getOne(t, ch2, q.Name)
		})
	}
}

// Connections racing to declare one name with different arguments end
// with one queue (or exchange); every other declare gets RabbitMQ's 406.
func TestConcurrentDeclaresOneWinner(t *testing.T) {
	cases := []struct {
		name    string
		declare func(ch *amqp091.Channel, i int) error
		reason  string // in every loser's 406
		count   func(m meta.Store) int
	}{
		{"queue",
			func(ch *amqp091.Channel, i int) error {
				_, err := ch.QueueDeclare("contested", true, false, false, false, amqp091.Table{"x-max-length": int32(100 + i)})
				return err
			},
			"inequivalent arg 'x-max-length' for queue 'contested'",
			func(m meta.Store) (n int) {
				for _, q := range m.Queues("/") {
					if q.Name == "contested" {
						n++
					}
				}
				return n
			}},
		{"exchange",
			func(ch *amqp091.Channel, i int) error {
				return ch.ExchangeDeclare("contested", "direct", true, false, false, false, amqp091.Table{"alternate-exchange": fmt.Sprintf("ae-%d", i)})
			},
			"inequivalent arg 'alternate-exchange' for exchange 'contested'",
			func(m meta.Store) (n int) {
				for _, x := range m.Exchanges("/") {
					if x.Name == "contested" {
						n++
					}
				}
				return n
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := brokertest.Start(t)
			const racers = 8
			chans := make([]*amqp091.Channel, racers)
			for i := range chans {
				chans[i] = n.Channel(t)
			}
			errs := make([]error, racers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, ch := range chans {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i] = c.declare(ch, i)
				}()
			}
			close(start)
			wg.Wait()
			won := 0
			for i, err := range errs {
				if err == nil {
					won++
					continue
				}
				if code, reason := amqpCode(err); code != 406 || !strings.Contains(reason, c.reason) {
					t.Errorf("racer %d: %v; want 406 %s", i, err, c.reason)
				}
			}
			if got := c.count(n.Meta()); won != 1 || got != 1 {
				t.Fatalf("%d declares won, metadata has %d named contested; want 1 and 1", won, got)
			}
		})
	}
}

// Every queue is in the metadata with the node that holds it; an exclusive
// one with its connection, and it leaves the metadata when the connection
// closes.
func TestQueuesRecordedWithPlacement(t *testing.T) {
	n := brokertest.Start(t)
	conn := n.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	excl, err := ch.QueueDeclare("", false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("transient", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	record := func(name string) (meta.Queue, bool) {
		for _, q := range n.Meta().Queues("/") {
			if q.Name == name {
				return q, true
			}
		}
		return meta.Queue{}, false
	}
	cases := []struct {
		name      string
		exclusive bool
	}{{excl.Name, true}, {"transient", false}}
	for _, c := range cases {
		q, ok := record(c.name)
		switch {
		case !ok:
			t.Fatalf("queue %s is not in the metadata", c.name)
		case q.Node != "warren@test":
			t.Errorf("queue %s placed on %q, want warren@test", c.name, q.Node)
		case c.exclusive && (q.Owner == nil || q.Owner.Node != "warren@test" || q.Owner.Conn == 0):
			t.Errorf("exclusive queue %s owner %+v, want this node's connection", c.name, q.Owner)
		case !c.exclusive && q.Owner != nil:
			t.Errorf("queue %s has owner %+v, want none", c.name, q.Owner)
		}
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "the exclusive queue leaves the metadata when its connection closes", func() bool {
		_, ok := record(excl.Name)
		return !ok
	})
	if _, ok := record("transient"); !ok {
		t.Fatal("the non-exclusive transient queue went with the connection")
	}
}

// After kill -9 the node drops the transient and exclusive queues and the
// transient exchanges the crash left in its metadata, and keeps the durable
// ones with their bindings.
func TestKill9DropsTransientQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the warren binary")
	}
	bin := brokertest.BuildWarren(t)
	dir := t.TempDir()
	p := startProcess(t, bin, dir)
	conn, err := amqp091.Dial(p.url())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		name               string
		durable, exclusive bool
	}{{"durable", true, false}, {"transient", false, false}, {"exclusive", true, true}, {"exclusive-transient", false, true}} {
		if _, err := ch.QueueDeclare(q.name, q.durable, false, q.exclusive, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []struct {
		name    string
		durable bool
	}{{"dx", true}, {"tx", false}} {
		if err := ch.ExchangeDeclare(x.name, "direct", x.durable, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind("durable", "k", x.name, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	p.Kill()
	conn.Close()

	p2 := startProcess(t, bin, dir)
	conn2, err := amqp091.Dial(p2.url())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	cases := []struct {
		kind, name string
		kept       bool
	}{
		{"queue", "durable", true},
		{"queue", "transient", false},
		{"queue", "exclusive", false},
		{"queue", "exclusive-transient", false},
		{"exchange", "dx", true},
		{"exchange", "tx", false},
	}
	for _, c := range cases {
		t.Run(c.kind+" "+c.name, func(t *testing.T) {
			ch, err := conn2.Channel()
			if err != nil {
				t.Fatal(err)
			}
			defer ch.Close()
			if c.kind == "queue" {
				_, err = ch.QueueDeclarePassive(c.name, false, false, false, false, nil)
			} else {
				err = ch.ExchangeDeclarePassive(c.name, "direct", false, false, false, false, nil)
			}
			code, _ := amqpCode(err)
			if c.kept && err != nil || !c.kept && code != 404 {
				t.Fatalf("passive declare after kill -9: %v; want kept=%v", err, c.kept)
			}
		})
	}
	// The durable binding survived: a publish through dx reaches the queue.
	ch2, err := conn2.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch2.Publish("dx", "k", false, false, amqp091.Publishing{Body: []byte("after restart")}); err != nil {
		t.Fatal(err)
	}
	getOne(t, ch2, "durable")
}

// A single node whose cluster.node_name changed keeps its queues and
// their messages: it adopts the records placed on its old name.
func TestRenamedSingleNodeKeepsQueues(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("kept", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", "kept", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("before rename")}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "the message is queued", func() bool {
		q, err := ch.QueueDeclarePassive("kept", true, false, false, false, nil)
		return err == nil && q.Messages == 1
	})
	n.Stop()
	n.Cfg.Cluster.NodeName = "warren@renamed"
	n2 := brokertest.StartConfig(t, n.Cfg)
	ch2 := n2.Channel(t)
	if d := getOne(t, ch2, "kept"); string(d.Body) != "before rename" {
		t.Fatalf("got %q", d.Body)
	}
	for _, q := range n2.Meta().Queues("/") {
		if q.Name == "kept" && q.Node != "warren@renamed" {
			t.Fatalf("queue still placed on %q", q.Node)
		}
	}
}
