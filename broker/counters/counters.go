// Package counters holds a node's cumulative churn counters: connections
// and channels opened and closed, queues declared, created and deleted.
// The protocol servers and the vhosts add to them; the HTTP API (churn
// rates) and the Prometheus metrics (rabbitmq_connections_opened_total
// and friends) read them. Each is one atomic add per event, never per
// message. The message counters live with their protocol servers
// (amqp.Counters, stream.Counters).
package counters

import "sync/atomic"

// Churn counts, since the node started, what RabbitMQ calls connection
// churn. Whoever takes a *Churn in its config makes one when given nil.
type Churn struct {
	ConnectionsOpened, ConnectionsClosed atomic.Uint64
	ChannelsOpened, ChannelsClosed       atomic.Uint64
	// QueuesDeclared counts queue.declare (and HTTP/stream declares) that
	// succeeded, creating the queue or not; QueuesCreated those that
	// created it.
	QueuesDeclared, QueuesCreated, QueuesDeleted atomic.Uint64
}
