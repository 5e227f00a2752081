package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/meta"
)

// A node taken out of the cluster (forget-node while it is stopped, or
// leave) takes its queues with it, as RabbitMQ's forget_cluster_node
// deletes a removed node's classic queues: their records and bindings go
// from every remaining member, the other nodes' queues stay, and the name
// can be declared again (a new, empty queue on the declaring node). After
// the remaining node restarts alone, nothing of the removed node's comes
// back.
func TestARemovedNodesQueuesAreDeleted(t *testing.T) {
	for _, how := range []string{"forget-node", "leave"} {
		t.Run(how, func(t *testing.T) {
			c := brokertest.StartCluster(t, 2)
			n1, n2 := c.Nodes[0], c.Nodes[1]
			ch2 := n2.Channel(t)
			if _, err := ch2.QueueDeclare("on-n2", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := ch2.QueueBind("on-n2", "k", "amq.direct", false, nil); err != nil {
				t.Fatal(err)
			}
			ch1 := n1.Channel(t)
			if _, err := ch1.QueueDeclare("on-n1", true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			eventually.Succeeds(t, 5*time.Second, "n1 knows both queues", func() error {
				if qs := queueNodes(n1); qs["on-n2"] != "warren@n2" || qs["on-n1"] != "warren@n1" {
					return fmt.Errorf("queues %v", qs)
				}
				return nil
			})
			switch how {
			case "forget-node":
				c.Stop(1)
				if code := n1.API(t, http.MethodDelete, "/api/cluster/nodes/warren@n2", nil, nil); code != http.StatusNoContent {
					t.Fatalf("forget: %d", code)
				}
			case "leave":
				if code := n2.API(t, http.MethodPost, "/api/cluster/leave", nil, nil); code != http.StatusNoContent {
					t.Fatalf("leave: %d", code)
				}
				c.Stop(1)
			}
			gone := func(n *brokertest.Node) error {
				qs := queueNodes(n)
				if _, ok := qs["on-n2"]; ok || qs["on-n1"] != "warren@n1" {
					return fmt.Errorf("queues after %s: %v", how, qs)
				}
				if i := slices.IndexFunc(n.Meta().Bindings("/"), func(b meta.Binding) bool { return b.Destination == "on-n2" }); i >= 0 {
					return fmt.Errorf("the binding to on-n2 is left")
				}
				return nil
			}
			eventually.Succeeds(t, 5*time.Second, "the removed node's queue is deleted", func() error { return gone(n1) })
			q, err := ch1.QueueDeclare("on-n2", true, false, false, false, nil)
			if err != nil || q.Messages != 0 {
				t.Fatalf("declare on-n2 again: %+v %v", q, err)
			}
			if qs := queueNodes(n1); qs["on-n2"] != "warren@n1" {
				t.Errorf("the new on-n2 is placed on %q", qs["on-n2"])
			}
			if _, err := ch1.QueueDelete("on-n2", false, false, false); err != nil {
				t.Fatal(err)
			}
			again := c.Restart(0)
			if err := gone(again); err != nil {
				t.Error(err)
			}
		})
	}
}

// queueNodes maps each queue of vhost / to its node.
func queueNodes(n *brokertest.Node) map[string]string {
	out := map[string]string{}
	for _, q := range n.Meta().Queues("/") {
		out[q.Name] = q.Node
	}
	return out
}
