package server_test

import (
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// A node cut off from its cluster's metadata leader for the grace period
// closes the connections that own exclusive queues (the cluster deletes
// those queues, as RabbitMQ's minority side loses them), and keeps its
// other connections. Once the cluster is back, the exclusive queue's
// record is gone everywhere and its client can declare it again.
func TestNodeWithoutLeaderClosesConnectionsOwningExclusiveQueues(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n3 := c.Nodes[2]
	owner := n3.Dial(t)
	ownerClosed := owner.NotifyClose(make(chan *amqp091.Error, 1))
	och, err := owner.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := och.QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := och.Consume("mine", "", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	other := n3.Dial(t)
	if _, err := n3.Channel(t).QueueDeclare("shared", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	// n3 loses its leader: the other two stop.
	c.Stop(0)
	c.Stop(1)
	select {
	case <-ownerClosed:
	case <-time.After(30 * time.Second):
		t.Fatal("the connection owning an exclusive queue is still open on a node without a leader")
	}
	if other.IsClosed() {
		t.Error("a connection owning no exclusive queue was closed")
	}

	n1 := c.Restart(0)
	c.Restart(1)
	for _, n := range []*brokertest.Node{n1, n3} {
		eventually.Succeeds(t, 20*time.Second, "the exclusive queue's record is gone", func() error {
			if _, ok := queueRec(n, "mine"); ok {
				return fmt.Errorf("%s still has queue mine", n.Cfg.Cluster.NodeName)
			}
			return nil
		})
	}
	if _, ok := queueRec(n3, "shared"); !ok {
		t.Error("the durable queue was deleted")
	}
	eventually.Succeeds(t, 10*time.Second, "the client declares its exclusive queue again", func() error {
		conn, err := amqp091.Dial(n3.URL())
		if err != nil {
			return err
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		_, err = ch.QueueDeclare("mine", false, false, true, false, nil)
		return err
	})
}
