package server_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// A node that goes down takes its transient queues with it, as RabbitMQ's
// on_node_down deletes a down node's non-durable classic queues: once the
// node has been down for the grace period, the metadata leader deletes
// the records of its non-durable queues (bindings included), so the
// survivors answer a passive declare with "no queue" and a client may
// declare the name again elsewhere. Its durable queue stays, answers
// NOT_FOUND "home node ... is down or inaccessible" while the node is
// down, and has its message again once the node is back.
func TestDownNodesTransientQueuesAreDeleted(t *testing.T) {
	for _, tc := range []struct {
		name string
		down func(c *brokertest.Cluster)
		back bool // the node is started again (a stopped one can be)
	}{
		{"stopped", func(c *brokertest.Cluster) { c.Stop(1) }, true},
		{"cut off", func(c *brokertest.Cluster) { c.Nodes[1].CutClusterLink() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := brokertest.StartCluster(t, 3)
			n1, n2 := c.Nodes[0], c.Nodes[1]
			ch2 := n2.Channel(t)
			if _, err := ch2.QueueDeclare("transient", false, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := ch2.QueueBind("transient", "t", "amq.direct", false, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := ch2.QueueDeclare("durable", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			// A client on n1 uses both queues, held by n2.
			eventually.Succeeds(t, 10*time.Second, "n1's client sees n2's queues", func() error {
				for _, name := range []string{"transient", "durable"} {
					if _, err := n1.Channel(t).QueueDeclarePassive(name, name == "durable", false, false, false, nil); err != nil {
						return fmt.Errorf("%s: %w", name, err)
					}
				}
				return nil
			})
			ch1 := n1.Channel(t)
			if err := ch1.Confirm(false); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"transient", "durable"} {
				dc, err := ch1.PublishWithDeferredConfirm("", name, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("m")})
				if err != nil {
					t.Fatal(err)
				}
				if !dc.Wait() {
					t.Fatalf("the publish to %s through n1 was nacked", name)
				}
			}

			tc.down(c)
			for _, n := range []*brokertest.Node{n1, c.Nodes[2]} {
				eventually.Succeeds(t, 30*time.Second, "the down node's transient queue is deleted", func() error {
					if _, ok := queueRec(n, "transient"); ok {
						return fmt.Errorf("%s still has the queue transient", n.Cfg.Cluster.NodeName)
					}
					for _, b := range n.Meta().Bindings("/") {
						if b.Destination == "transient" {
							return fmt.Errorf("%s still has a binding to transient: %+v", n.Cfg.Cluster.NodeName, b)
						}
					}
					return nil
				})
				if rec, ok := queueRec(n, "durable"); !ok || rec.Node != "warren@n2" {
					t.Errorf("%s: the down node's durable queue: %+v %v", n.Cfg.Cluster.NodeName, rec, ok)
				}
			}
			for _, tt := range []struct {
				queue, want string
			}{
				{"transient", "NOT_FOUND - no queue 'transient' in vhost '/'"},
				{"durable", "NOT_FOUND - home node 'warren@n2' of durable queue 'durable' in vhost '/' is down or inaccessible"},
			} {
				_, err := n1.Channel(t).QueueDeclarePassive(tt.queue, tt.queue == "durable", false, false, false, nil)
				var ae *amqp091.Error
				if !errors.As(err, &ae) || ae.Code != amqp091.NotFound || ae.Reason != tt.want {
					t.Errorf("passive declare of %s on n1: %v, want 404 %q", tt.queue, err, tt.want)
				}
			}
			// Its client declares the transient queue again, on n1.
			if _, err := n1.Channel(t).QueueDeclare("transient", false, false, false, false, nil); err != nil {
				t.Fatalf("declare the transient queue again on n1: %v", err)
			}
			if rec, ok := queueRec(n1, "transient"); !ok || rec.Node != "warren@n1" {
				t.Errorf("the declared-again queue: %+v %v, want it on warren@n1", rec, ok)
			}
			if !tc.back {
				return
			}
			c.Restart(1)
			eventually.Succeeds(t, 20*time.Second, "the durable queue answers with its message once its node is back", func() error {
				q, err := n1.Channel(t).QueueDeclarePassive("durable", true, false, false, false, nil)
				if err != nil {
					return err
				}
				if q.Messages != 1 {
					return fmt.Errorf("durable has %d messages, want 1", q.Messages)
				}
				return nil
			})
			if rec, ok := queueRec(c.Nodes[1], "transient"); !ok || rec.Node != "warren@n1" {
				t.Errorf("n2 back: the queue transient is %+v %v, want n1's", rec, ok)
			}
		})
	}
}
