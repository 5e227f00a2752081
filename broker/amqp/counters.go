package amqp

import (
	"sync/atomic"

	"github.com/warrenmq/warren/broker/queue"
)

// Counters are the server's cumulative message counters since the node
// started; the HTTP API's message_stats and the Prometheus metrics
// (rabbitmq_global_*) read them. Each is bumped once per message or per
// batch where the message is handled anyway; what can be derived from
// others is not counted twice (routed = published - unroutable, dropped =
// unroutable - returned, delivered = the four delivery kinds).
type Counters struct {
	// Published counts messages received from publishers (basic.publish
	// and the HTTP API's publish).
	Published atomic.Uint64
	// ReceivedConfirm counts the published messages of channels in
	// confirm mode.
	ReceivedConfirm atomic.Uint64
	// Confirmed counts messages confirmed (basic.ack) to publishers: a
	// basic.ack with multiple=true for ten messages counts ten.
	Confirmed atomic.Uint64
	// Unroutable counts messages that reached no queue; Returned those of
	// them that were mandatory and went back with basic.return.
	Unroutable, Returned atomic.Uint64

	// ByQueueType are the delivery counters by the type of the queue
	// delivered from (QueueTypeClassic ...), as RabbitMQ labels them.
	ByQueueType [NumQueueTypes]DeliveryCounters

	// Message sizes (body bytes) of what was published over AMQP, counted
	// per connection and added here in batches (see sizeHistogram).
	SizeBuckets [len(MessageSizeBuckets) + 1]atomic.Uint64 // the last is +Inf
	SizeSum     atomic.Uint64
}

// DeliveryCounters count what consumers got from one type of queue.
type DeliveryCounters struct {
	// Deliveries by kind: basic.deliver to consumers with manual or
	// automatic acknowledgement, basic.get-ok with manual or automatic.
	ConsumeManualAck, ConsumeAutoAck atomic.Uint64
	GetManualAck, GetAutoAck         atomic.Uint64
	// GetEmpty counts basic.get answered basic.get-empty.
	GetEmpty atomic.Uint64
	// Redelivered counts deliveries with the redelivered flag; Acked
	// messages acknowledged by consumers.
	Redelivered, Acked atomic.Uint64
}

// Delivered is every message delivered from the queue type.
func (d *DeliveryCounters) Delivered() uint64 {
	return d.ConsumeManualAck.Load() + d.ConsumeAutoAck.Load() + d.GetManualAck.Load() + d.GetAutoAck.Load()
}

// Queue types as the delivery counters index them.
const (
	QueueTypeClassic = iota
	QueueTypeQuorum
	QueueTypeStream
	// QueueTypeVolatile is direct reply-to's pseudo-queue (RabbitMQ's
	// rabbit_volatile_queue).
	QueueTypeVolatile
	NumQueueTypes
)

// QueueTypeLabel is RabbitMQ's name of a queue type index
// (rabbit_classic_queue, ...), the queue_type label of its metrics.
func QueueTypeLabel(i int) string {
	switch i {
	case QueueTypeQuorum:
		return "rabbit_quorum_queue"
	case QueueTypeStream:
		return "rabbit_stream_queue"
	case QueueTypeVolatile:
		return "rabbit_volatile_queue"
	}
	return "rabbit_classic_queue"
}

// queueTypeIndex is the index of a queue's type (queue.Info.Type).
func queueTypeIndex(q queue.Queue) int {
	switch q.Info().Type {
	case "quorum":
		return QueueTypeQuorum
	case "stream":
		return QueueTypeStream
	}
	return QueueTypeClassic
}

// MessageSizeBuckets are the upper bounds of the message size histogram,
// RabbitMQ's (rabbitmq_message_size_bytes).
var MessageSizeBuckets = [...]uint64{100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000}

// Delivered is every message delivered to a consumer or basic.get.
func (c *Counters) Delivered() uint64 {
	var n uint64
	for i := range c.ByQueueType {
		n += c.ByQueueType[i].Delivered()
	}
	return n
}

// Acked is every message acknowledged by consumers.
func (c *Counters) Acked() uint64 {
	var n uint64
	for i := range c.ByQueueType {
		n += c.ByQueueType[i].Acked.Load()
	}
	return n
}

// Redelivered is every delivery with the redelivered flag.
func (c *Counters) Redelivered() uint64 {
	var n uint64
	for i := range c.ByQueueType {
		n += c.ByQueueType[i].Redelivered.Load()
	}
	return n
}

// Routed is every published message that reached at least one queue.
func (c *Counters) Routed() uint64 {
	p, u := c.Published.Load(), c.Unroutable.Load()
	if u > p {
		return 0
	}
	return p - u
}

// UnroutableDropped is every unroutable message that was not returned.
func (c *Counters) UnroutableDropped() uint64 {
	u, r := c.Unroutable.Load(), c.Returned.Load()
	if r > u {
		return 0
	}
	return u - r
}

// ObserveSize counts one published message of n body bytes, for callers
// off the hot path (the HTTP API's publish).
func (c *Counters) ObserveSize(n int) {
	c.SizeBuckets[sizeBucket(uint64(n))].Add(1)
	c.SizeSum.Add(uint64(n))
}

func sizeBucket(n uint64) int {
	for i, b := range MessageSizeBuckets {
		if n <= b {
			return i
		}
	}
	return len(MessageSizeBuckets)
}

// pubStats is what a connection's reader counts of its publishes without
// atomics (only the reader goroutine touches it); flush adds it to the
// server's Counters once per read batch.
type pubStats struct {
	receivedConfirm uint64
	sizeSum         uint64
	sizes           [len(MessageSizeBuckets) + 1]uint64
	n               int
}

func (p *pubStats) observe(size int, confirm bool) {
	p.sizes[sizeBucket(uint64(size))]++
	p.sizeSum += uint64(size)
	if confirm {
		p.receivedConfirm++
	}
	p.n++
}

func (p *pubStats) flush(c *Counters) {
	if p.n == 0 {
		return
	}
	for i, n := range p.sizes {
		if n > 0 {
			c.SizeBuckets[i].Add(n)
		}
	}
	c.SizeSum.Add(p.sizeSum)
	if p.receivedConfirm > 0 {
		c.ReceivedConfirm.Add(p.receivedConfirm)
	}
	*p = pubStats{}
}
