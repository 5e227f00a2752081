package amqp

import (
	"sync"
	"time"

	"github.com/warrenmq/warren/broker/queue"
)

// ackFlushAt is the number of pending acks that goes to the queues at once;
// fewer wait up to ackFlushDelay for company.
const (
	ackFlushAt    = 64
	ackFlushDelay = time.Millisecond
)

// ackBatch collects a connection's acks per queue before they are handed
// to the queues. A client that acks every message on its own makes one
// socket read per ack; handing each to its queue would cost the queue a
// turn per message. Credit does not wait for this: the channel returns it
// when the ack is read (settle). The queues get the acks before anything
// else the connection sends that could observe them (every method but
// publish and the settlements flushes them first), when ackFlushAt are
// pending, and at the latest ackFlushDelay after the first one.
//
// Acks to a queue on another node (a forward proxy, which has a Node
// method) do not wait for company beyond the socket read they came in:
// that node counts the consumer's prefetch credit in them, so every
// delay there is a delay of the next deliveries.
//
// Lock order: ackBatch.mu, then a queue's lock (queue.Ack posts to it).
type ackBatch struct {
	mu     sync.Mutex
	queues []queue.Queue
	seqs   [][]uint64
	n      int
	remote bool        // a queue of the batch is on another node
	timer  *time.Timer // stopped until armed; fires flush
	armed  bool
}

func (a *ackBatch) init() {
	a.timer = time.AfterFunc(time.Hour, func() {
		a.mu.Lock()
		a.armed = false
		a.flushLocked()
		a.mu.Unlock()
	})
	a.timer.Stop()
}

func (a *ackBatch) add(q queue.Queue, seqs []uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n += len(seqs)
	for i, have := range a.queues {
		if have == q {
			a.seqs[i] = append(a.seqs[i], seqs...)
			return
		}
	}
	a.queues = append(a.queues, q)
	a.seqs = append(a.seqs, seqs)
	if onAnotherNode(q) {
		a.remote = true
	}
}

// flush hands every pending ack to its queue now.
func (a *ackBatch) flush() {
	a.mu.Lock()
	a.flushLocked()
	a.mu.Unlock()
}

// flushSoon hands the pending acks over now if there are ackFlushAt of
// them, and otherwise makes sure they go within ackFlushDelay.
func (a *ackBatch) flushSoon() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n >= ackFlushAt || a.remote {
		a.flushLocked()
		return
	}
	if a.n > 0 && !a.armed {
		a.armed = true
		a.timer.Reset(ackFlushDelay)
	}
}

func (a *ackBatch) flushLocked() {
	for i, q := range a.queues {
		q.Ack(a.seqs[i])
		a.seqs[i] = nil
	}
	a.queues, a.seqs, a.n, a.remote = a.queues[:0], a.seqs[:0], 0, false
}

// stop stops the timer (the connection is closing; flush first).
func (a *ackBatch) stop() { a.timer.Stop() }

// onAnotherNode reports whether q is a queue another node holds (its
// forward proxy, which names that node).
func onAnotherNode(q queue.Queue) bool {
	_, ok := q.(interface{ Node() string })
	return ok
}
