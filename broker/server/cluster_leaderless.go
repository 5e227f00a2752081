package server

import (
	"context"
	"time"
)

// leaderlessPoll is how often a node with a metadata leader checks that
// it still has one, besides the group's leader-change signal (which may
// drop an observation when many come at once).
const leaderlessPoll = 10 * time.Second

// watchLeaderless runs until stop closes. A node that has had no metadata
// leader for downGrace is cut off from its cluster (or the
// cluster lost its majority): the leader on the other side, when there is
// one, deletes this node's exclusive queues once it has seen the node down
// as long. So that this matches what the clients see, the node closes the
// connections that own exclusive queues then (their clients reconnect,
// perhaps to another node, and declare their queues again), as RabbitMQ's
// minority side loses them; other connections stay. Once a leader is back,
// the records of the exclusive queues whose owning connection is no
// longer open here are deleted (a connection closed without a leader
// could not delete them itself).
func (b *Broker) watchLeaderless(stop <-chan struct{}) {
	g := b.cluster.meta.Group()
	for {
		for g.Leader() != "" {
			select {
			case <-stop:
				return
			case <-g.LeaderChanged():
			case <-time.After(leaderlessPoll):
			}
		}
		since := time.Now()
		closed := false
		for g.Leader() == "" {
			if !closed && time.Since(since) >= downGrace {
				b.closeExclusiveOwners()
				closed = true
			}
			select {
			case <-stop:
				return
			case <-g.LeaderChanged():
			case <-time.After(sweepInterval):
			}
		}
		if closed {
			b.dropOrphanedExclusive(stop)
		}
	}
}

// exclusiveOwnersHere lists, by connection id, the exclusive queues whose
// owning connection was opened on this node: vhost and queue names.
func (b *Broker) exclusiveOwnersHere() map[uint64][][2]string {
	self := b.cluster.self.Name
	out := map[uint64][][2]string{}
	for _, v := range b.meta.Vhosts() {
		for _, q := range b.meta.Queues(v.Name) {
			if q.Exclusive && q.Owner != nil && q.Owner.Node == self {
				out[q.Owner.Conn] = append(out[q.Owner.Conn], [2]string{v.Name, q.Name})
			}
		}
	}
	return out
}

// closeExclusiveOwners closes the AMQP connections that own exclusive
// queues (the node has had no metadata leader for the grace period).
func (b *Broker) closeExclusiveOwners() {
	owners := b.exclusiveOwnersHere()
	if len(owners) == 0 || b.AMQP == nil {
		return
	}
	n := 0
	for _, ci := range b.AMQP.Connections() {
		if _, ok := owners[ci.ID]; ok {
			if b.AMQP.CloseConnection(ci.Name, "this node lost its cluster's metadata leader; its exclusive queues are deleted, declare them again") == nil {
				n++
			}
		}
	}
	b.log.Warn("cluster: no metadata leader for the grace period: closed the connections that own exclusive queues (the cluster deletes those queues)", "node", b.cluster.self.Name, "grace", downGrace, "connections", n)
}

// dropOrphanedExclusive deletes, once a leader is back, the records of
// this node's exclusive queues whose connection is no longer open.
func (b *Broker) dropOrphanedExclusive(stop <-chan struct{}) {
	open := map[uint64]bool{}
	if b.AMQP != nil {
		for _, ci := range b.AMQP.Connections() {
			open[ci.ID] = true
		}
	}
	for conn, queues := range b.exclusiveOwnersHere() {
		if open[conn] {
			continue
		}
		for _, vq := range queues {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := b.meta.DeleteQueue(ctx, vq[0], vq[1])
			cancel()
			if err != nil {
				b.log.Warn("cluster: cannot delete an exclusive queue whose connection closed while the node had no metadata leader", "queue", vq[1], "vhost", vq[0], "error", err)
				continue
			}
			b.log.Info("cluster: deleted an exclusive queue whose connection closed while the node had no metadata leader", "queue", vq[1], "vhost", vq[0])
		}
	}
}
