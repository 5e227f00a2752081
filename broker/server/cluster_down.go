package server

import (
	"context"
	"time"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/vhost"
)

// downGrace is how long a member must have been reported down (the
// transport reports a peer down after 2 s without an answer) before the
// metadata leader deletes its transient queues, as RabbitMQ's
// rabbit_amqqueue:on_node_down does: its non-durable queues (their
// messages were in that node's memory or were to be dropped at its
// restart, and the node deletes them itself when it starts again) and the
// exclusive queues whose connection was on it. A client that reconnects
// to another node must be able to declare its queue again. The grace
// keeps a short blip from taking the queues of a node that is still
// running.
const downGrace = 5 * time.Second

// sweepInterval is how often the leader looks for such queues.
const sweepInterval = time.Second

// sweepDownNodes runs until stop closes: on the metadata leader, it
// deletes the transient queues of members down for downGrace. It
// sleeps while no member is reported down (an idle cluster pays nothing),
// and looks every sweepInterval while one is.
func (c *clusterNode) sweepDownNodes(stop <-chan struct{}) {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		if !c.anyDown() {
			t.Stop()
			select {
			case <-stop:
				return
			case <-c.wentDown:
			}
			t.Reset(sweepInterval)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, node := range c.downFor(downGrace) {
			if !c.meta.Group().IsLeader() {
				break
			}
			if c.dropTransientOf(node) {
				c.swept(node)
			}
		}
	}
}

// anyDown reports whether a peer is reported down and not swept yet.
func (c *clusterNode) anyDown() bool {
	c.upMu.Lock()
	defer c.upMu.Unlock()
	return len(c.downSince) > 0
}

// downFor lists the peers reported down, and not up since, for at least d.
func (c *clusterNode) downFor(d time.Duration) []string {
	c.upMu.Lock()
	defer c.upMu.Unlock()
	var out []string
	for node, since := range c.downSince {
		if time.Since(since) >= d {
			out = append(out, node)
		}
	}
	return out
}

// swept forgets node's down report once its queues were dropped: it is
// swept once per time it goes down (a node taken out of the cluster is
// not looked at again).
func (c *clusterNode) swept(node string) {
	c.upMu.Lock()
	defer c.upMu.Unlock()
	if !c.up[node] {
		delete(c.downSince, node)
	}
}

// dropTransientOf deletes the queues that did not outlive node (each
// logged): those it held that vhost.Transient reports (non-durable or
// exclusive), and the exclusive queues whose connection was on it wherever
// they are held. It stops, leaving the rest for the next sweep, when a
// delete fails or node is reported up again (a partition that healed: its
// queues are running), and reports whether none is left.
func (c *clusterNode) dropTransientOf(node string) bool {
	left := false
	for _, v := range c.meta.Vhosts() {
		for _, q := range c.meta.Queues(v.Name) {
			if !wentWith(q, node) {
				continue
			}
			if !c.reportedDown(node) {
				return false
			}
			// Only the record listed: a queue deleted and declared again
			// under its name since (on a node that is up) stays.
			q.Vhost = v.Name
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			deleted, err := c.meta.DeleteQueueIf(ctx, q)
			cancel()
			if err != nil {
				c.log.Warn("cluster: cannot delete a transient queue of a down node", "queue", q.Name, "vhost", v.Name, "node", node, "exclusive", q.Exclusive, "error", err)
				return false
			}
			if !deleted {
				// Changed since the list was read: the next sweep looks
				// at the record as it is now.
				left = true
				continue
			}
			if q.Exclusive {
				c.log.Info("cluster: deleted an exclusive queue of a down node (its connection was there)", "queue", q.Name, "vhost", v.Name, "node", node)
			} else {
				c.log.Info("cluster: deleted a non-durable queue of a down node (its messages went with the node)", "queue", q.Name, "vhost", v.Name, "node", node)
			}
		}
	}
	return !left
}

// wentWith reports whether q goes when node goes down: a transient queue
// node held, or an exclusive queue whose connection was on node.
func wentWith(q meta.Queue, node string) bool {
	if q.Node == node && vhost.Transient(q) {
		return true
	}
	return q.Exclusive && q.Owner != nil && q.Owner.Node == node
}

// nodeDown reports whether the transport reports node down (vhost's
// queue.delete of a queue there: only then is its record force-deleted).
func (b *Broker) nodeDown(node string) bool {
	return b.cluster != nil && b.cluster.reportedDown(node)
}

// reportedDown reports whether the transport reported node down and not
// up since (a node it never reported is not down).
func (c *clusterNode) reportedDown(node string) bool {
	c.upMu.Lock()
	defer c.upMu.Unlock()
	up, known := c.up[node]
	return known && !up
}
