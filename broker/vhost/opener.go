package vhost

import (
	"context"

	"github.com/warrenmq/warren/broker/meta"
)

// maxOpening bounds the queues of a vhost being opened at once (their
// directories and files created) off the apply goroutine, and the
// goroutines that open them.
const maxOpening = 16

// openPool is the queue of opens startOpen hands off, and the workers that
// take them: at most maxOpening goroutines, started when opens are queued
// and none is idle, each taking the next open in the order the events
// recorded them until the queue is empty, then ending. A follower applying
// a long log of declares therefore queues their opens, instead of parking
// one goroutine per queue. Its fields are under mu, a leaf (taken under
// Vhost.mu by startOpen, under nothing by a worker).
type openPool struct {
	queue   []*queueEntry // FIFO; the head is the next to open
	workers int           // running workers, at most maxOpening
}

// startOpen records a queue held here and queues its open on the vhost's
// openers; v.mu is held. The entry is in the queue map and routing at
// once, so a publish or declare that finds it waits for the open
// (queueEntry.wait) rather than missing it; a delete waits for it too. The
// record is durable in the metadata, which reopens the queue after a
// crash, so nothing is lost when the process dies before the open ends.
func (v *Vhost) startOpen(rec meta.Queue) {
	e := &queueEntry{rec: rec, opening: make(chan struct{})}
	v.queues[rec.Name] = e
	v.routes.AddQueue(rec.Name)
	v.openMu.Lock()
	defer v.openMu.Unlock()
	v.openPool.queue = append(v.openPool.queue, e)
	if v.openPool.workers < maxOpening {
		// Added under v.mu before Close (which sets closed under v.mu)
		// waits: queuePut starts no open once closed is set.
		v.opens.Add(1)
		v.openPool.workers++
		go v.openWorker()
	}
}

// openWorker opens queued queues, in order, until none is left.
func (v *Vhost) openWorker() {
	defer v.opens.Done()
	for {
		v.openMu.Lock()
		if len(v.openPool.queue) == 0 {
			v.openPool.queue = nil // release the drained backing array
			v.openPool.workers--
			v.openMu.Unlock()
			return
		}
		e := v.openPool.queue[0]
		v.openPool.queue[0] = nil
		v.openPool.queue = v.openPool.queue[1:]
		v.openMu.Unlock()
		v.open(e)
	}
}

// open opens one queued queue and publishes the result in its entry. A
// queue whose open had not started when the vhost was closed is not
// opened (ErrClosed): its record is durable and the next Open recovers
// it; one opened as the vhost closed is closed here, as Close did not see
// it.
func (v *Vhost) open(e *queueEntry) {
	ctx := context.Background()
	if v.isClosed() {
		v.mu.Lock()
		e.openErr = ErrClosed
		v.mu.Unlock()
		close(e.opening)
		return
	}
	q, err := v.openRecord(ctx, e.rec)
	v.mu.Lock()
	e.q, e.openErr = q, err
	closed := v.closed
	if err != nil && !closed && v.queues[e.rec.Name] == e {
		v.routes.RemoveQueue(e.rec.Name)
	}
	v.mu.Unlock()
	close(e.opening)
	switch {
	case closed && q != nil:
		_ = q.Close(ctx) // Close did not see it: it stops here
	case q != nil:
		v.cfg.Churn.QueuesCreated.Add(1)
	}
}
