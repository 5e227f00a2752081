package forward

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/warrenmq/warren/broker/queue"
)

// Consuming through a node that does not hold the queue: the proxy's
// Consume registers a consumer on the owner (a remoteConsumer, below)
// that sends its deliveries back in batches ("forward.deliver", up to
// maxDeliverCalls calls in flight per consumer, numbered: this node's sub
// hands their batches to the real consumer in that order). The owner
// gives a consumer that acks at most its prefetch (or defaultWindow)
// deliveries unsettled, and a settlement through the proxy gives the
// credit back; one with automatic acks (whatever its prefetch, as in
// RabbitMQ) at most autoAckWindow (and autoAckWindowBytes) that this node
// has not handed to its client yet, and the sub gives that credit
// back as the client takes them (in each deliver call's answer, and with
// a "forward.credit" call when the client takes them later, once its
// socket drains). A client that does not read leaves the messages in the
// owner's queue, not in this node's memory. A consumer's node that goes
// down, or a deliver call that fails, cancels it on the owner and
// requeues its unacked messages; an owner that goes down cancels its
// consumers here (basic.cancel to clients that asked for it).

const (
	methodConsume   = "forward.consume"
	methodCancel    = "forward.cancel"
	methodDeliver   = "forward.deliver"
	methodCancelled = "forward.cancelled"
	methodCredit    = "forward.credit"
)

// defaultWindow bounds the unsettled deliveries of a consumer that acks
// without a prefetch limit.
const defaultWindow = 1000

// autoAckWindow and autoAckWindowBytes bound the deliveries of an
// automatic-ack consumer that its node has not handed to the client yet:
// at most autoAckWindow messages, and no more once autoAckWindowBytes of
// message bytes are out (one message goes whatever its size, so the bytes
// out may pass the bound by one message). The
// window is what is on its way while the consumer's node hands the
// client what came before, so it sets the rate a consumer on another node
// gets: at 1,000 the owner waited for credit (about 3.5 ms a round trip
// on a loaded 2-core machine) and s1 through another node ran at 76-86%
// of the owner's client with its queue paging a backlog to disk; from
// 2,000 up it ran at 95-100%, without a backlog. The byte bound keeps
// large messages from piling up on the consumer's node.
const (
	autoAckWindow      = 4000
	autoAckWindowBytes = 4 << 20
)

// A credit call that fails is made again after creditRetryMin, doubling
// up to creditRetryMax.
const (
	creditRetryMin = 50 * time.Millisecond
	creditRetryMax = 2 * time.Second
)

// sub is a consumer on this node of a queue another node holds.
type sub struct {
	q  *Queue
	c  queue.Consumer
	id uint64

	mu      sync.Mutex
	pending []queue.Delivery // received, refused by c so far
	gone    bool
	// next is the number of the deliver call whose batch is handed over
	// next; early holds the batches of later calls that came first.
	next  uint64
	early map[uint64][]queue.Delivery
	// handed counts the deliveries c took (automatic acks): the owner's
	// credit; credited is the count the owner was last told (in a deliver
	// call's answer or a credit call). crediting is set while a credit
	// call is under way; creditBatch is the least credit one gives.
	handed, credited uint64
	crediting        bool
	creditBatch      uint64
	// handedBytes and creditedBytes are handed and credited in message
	// bytes (deliveryBytes): credit is also due once a quarter of
	// autoAckWindowBytes was taken, for an owner held by that bound.
	handedBytes, creditedBytes int
}

// push hands pending deliveries to the consumer while it takes them and
// returns how many it took. s.mu held.
func (s *sub) push() int {
	if s.gone || len(s.pending) == 0 {
		return 0
	}
	n := 0
	if bc, ok := s.c.(queue.BatchConsumer); ok {
		// The consumer's locks once per run, not once per delivery.
		bc.DeliverEach(func() *queue.Delivery {
			if n == len(s.pending) {
				return nil
			}
			n++
			return &s.pending[n-1]
		})
	} else {
		for n < len(s.pending) && s.c.Deliver(s.pending[n]) {
			n++
		}
	}
	if s.c.NoAck() {
		for _, d := range s.pending[:n] {
			s.handedBytes += deliveryBytes(d)
		}
	}
	clear(s.pending[:n]) // the messages go with the client's output
	if n == len(s.pending) {
		s.pending = s.pending[:0]
	} else {
		s.pending = s.pending[n:]
	}
	if n > 0 {
		s.c.Flush()
		if s.c.NoAck() {
			s.handed += uint64(n)
		}
	}
	return n
}

// receive takes batch number n of the owner's deliveries (ds is the
// sub's from then on), in the order of their numbers, and hands over what
// it can. s.mu held.
func (s *sub) receive(n uint64, ds []queue.Delivery) error {
	switch {
	case n == s.next:
		if len(s.pending) == 0 {
			s.pending = ds // the batch is the sub's: taken, not copied
		} else {
			s.pending = append(s.pending, ds...)
		}
		s.next++
		for len(s.early) > 0 {
			more, ok := s.early[s.next]
			if !ok {
				break
			}
			delete(s.early, s.next)
			s.pending = append(s.pending, more...)
			s.next++
		}
	case n > s.next && n-s.next <= maxEarlyBatches:
		if _, dup := s.early[n]; dup {
			return fmt.Errorf("%w: batch %d twice", errMalformed, n)
		}
		if s.early == nil {
			s.early = map[uint64][]queue.Delivery{}
		}
		s.early[n] = ds
	default:
		return fmt.Errorf("%w: batch %d, expecting %d", errMalformed, n, s.next)
	}
	s.push()
	return nil
}

// held is the owner's seqs of the deliveries the sub holds, its client
// has not taken. s.mu held.
func (s *sub) held() []uint64 {
	var seqs []uint64
	for _, d := range s.pending {
		seqs = append(seqs, d.Seq)
	}
	for _, ds := range s.early {
		for _, d := range ds {
			seqs = append(seqs, d.Seq)
		}
	}
	return seqs
}

// giveCredit tells the owner, in the background, how many deliveries the
// client has taken once that is creditBatch more than it was told (or a
// quarter of autoAckWindowBytes more: creditDue), one call at a time: what
// the client takes while a call is under way goes with the next. A client
// that reads slowly so gets its deliveries in batches of a quarter window,
// not a call for every few it takes. (The owner never waits for less: it
// stops at a full window, a window is at least a creditBatch, and at
// autoAckWindowBytes, four times the bytes that make credit due.) s.mu
// held.
func (s *sub) giveCredit() {
	if s.crediting || s.gone || !s.creditDue() {
		return
	}
	s.crediting = true
	ok := s.q.c.goroutine(func() {
		retry := creditRetryMin
		for {
			s.mu.Lock()
			handed, handedBytes := s.handed, s.handedBytes
			if !s.creditDue() || s.gone {
				s.crediting = false
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(s.q.c.ctx, s.q.c.cfg.CallTimeout)
			_, err := s.q.c.cfg.Network.Call(ctx, s.q.node, methodCredit, appendCredit(nil, s.id, handed))
			cancel()
			if err != nil && versionMismatch(err) {
				// Asking again cannot help: the consumer gets no more.
				s.q.c.log.Warn("forward: the queue's node does not take this node's credit (another version); its automatic-ack consumer stops", "node", s.q.node, "queue", s.q.info.Name, "err", err)
				s.mu.Lock()
				s.crediting = false
				s.mu.Unlock()
				return
			}
			if err != nil {
				// The owner waits for this credit and nothing else brings
				// it: try again until it is taken, the consumer is gone
				// (cancelled, or its owner reported down: peerChanged)
				// or this node shuts down.
				s.q.c.log.Debug("forward: giving credit to a queue's node; trying again", "node", s.q.node, "queue", s.q.info.Name, "err", err, "in", retry)
				if !s.q.c.sleep(retry) {
					s.mu.Lock()
					s.crediting = false
					s.mu.Unlock()
					return
				}
				retry = min(2*retry, creditRetryMax)
				continue
			}
			retry = creditRetryMin
			s.mu.Lock()
			s.credited = max(s.credited, handed)
			s.creditedBytes = max(s.creditedBytes, handedBytes)
			s.mu.Unlock()
		}
	})
	if !ok { // the client is closed
		s.crediting = false
	}
}

// creditDue reports whether the client took enough since the owner was
// last told to tell it again: a creditBatch of deliveries, or a quarter of
// autoAckWindowBytes. s.mu held.
func (s *sub) creditDue() bool {
	return s.handed-s.credited >= s.creditBatch || s.handedBytes-s.creditedBytes >= autoAckWindowBytes/4
}

// Consume implements queue.Queue: c gets the owner's deliveries through
// this node.
func (q *Queue) Consume(ctx context.Context, c queue.Consumer, opts queue.ConsumeOptions) error {
	if q.info.Type == "stream" {
		// Its consumer arguments (x-stream-offset) and offsets do not
		// cross yet.
		return fmt.Errorf("%w: stream '%s' in vhost '%s' is on node '%s'; consume from it on that node", queue.ErrNotImplemented, q.info.Name, q.info.Vhost, q.node)
	}
	cl := q.c
	s := &sub{q: q, c: c, id: cl.nextID.Add(1), creditBatch: uint64(max(consumerWindow(c.NoAck(), opts.Prefetch)/4, 1))}
	cl.mu.Lock()
	cl.subs[s.id] = s
	cl.byConsumer[c] = s
	cl.mu.Unlock()
	var flags byte
	if c.NoAck() {
		flags |= 1
	}
	if opts.Exclusive {
		flags |= 2
	}
	req := appendVersionedQueueRef(nil, consumeVersion, q.info.Vhost, q.info.Name)
	req = binary.BigEndian.AppendUint64(req, s.id)
	req = append(req, flags)
	req = binary.BigEndian.AppendUint64(req, uint64(int64(opts.Priority)))
	req = binary.BigEndian.AppendUint32(req, uint32(max(opts.Prefetch, 0)))
	if _, err := q.call(ctx, methodConsume, req); err != nil {
		cl.dropSub(s)
		return err
	}
	return nil
}

// Cancel implements queue.Queue: the owner stops delivering; what it sent
// that the consumer never took is requeued there. An automatic-ack
// consumer gets what the owner's queue already handed it (counted
// delivered, forgotten there) before Cancel returns, as RabbitMQ's
// channel delivers what its queue handed it before cancel-ok: the owner
// answers the cancel once its last deliver call is answered, and what
// the client did not take goes to a queue.FinalConsumer's DeliverFinal.
func (q *Queue) Cancel(c queue.Consumer) {
	cl := q.c
	cl.mu.Lock()
	s := cl.byConsumer[c]
	cl.mu.Unlock()
	if s == nil {
		return
	}
	if c.NoAck() {
		q.cancelAutoAck(s)
		return
	}
	cl.dropSub(s)
	s.mu.Lock()
	s.gone = true
	seqs := s.held()
	s.pending, s.early = nil, nil
	s.mu.Unlock()
	req := binary.BigEndian.AppendUint64(appendQueueRef(nil, q.info.Vhost, q.info.Name), s.id)
	ctx, cancel := context.WithTimeout(context.Background(), q.c.cfg.CallTimeout)
	defer cancel()
	if _, err := q.c.cfg.Network.Call(ctx, q.node, methodCancel, req); err != nil {
		q.c.log.Debug("forward: cancel a consumer on its queue's node", "node", q.node, "queue", q.info.Name, "err", err)
	}
	if !c.NoAck() {
		q.Requeue(seqs)
	}
}

// cancelAutoAck cancels an automatic-ack consumer on the owner, taking
// the deliveries on their way meanwhile, and hands over what it holds.
func (q *Queue) cancelAutoAck(s *sub) {
	req := binary.BigEndian.AppendUint64(appendQueueRef(nil, q.info.Vhost, q.info.Name), s.id)
	ctx, cancel := context.WithTimeout(context.Background(), q.c.cfg.CallTimeout)
	defer cancel()
	if _, err := q.c.cfg.Network.Call(ctx, q.node, methodCancel, req); err != nil {
		q.c.log.Debug("forward: cancel a consumer on its queue's node", "node", q.node, "queue", q.info.Name, "err", err)
	}
	q.c.dropSub(s)
	s.mu.Lock()
	wasGone := s.gone
	s.gone = true
	ds := s.pending
	for _, n := range slices.Sorted(maps.Keys(s.early)) { // none once the owner answered
		ds = append(ds, s.early[n]...)
	}
	s.pending, s.early = nil, nil
	s.mu.Unlock()
	if wasGone || len(ds) == 0 { // cancelled by its queue or its owner's going down
		return
	}
	if fc, ok := s.c.(queue.FinalConsumer); ok {
		fc.DeliverFinal(ds)
		return
	}
	n := 0
	for n < len(ds) && s.c.Deliver(ds[n]) {
		n++
	}
	if n > 0 {
		s.c.Flush()
	}
}

// Wake implements queue.Queue: c may take what it refused.
func (q *Queue) Wake(c queue.Consumer) {
	cl := q.c
	cl.mu.Lock()
	var subs []*sub
	if c != nil {
		if s := cl.byConsumer[c]; s != nil {
			subs = append(subs, s)
		}
	} else {
		for _, s := range cl.subs {
			if s.q == q {
				subs = append(subs, s)
			}
		}
	}
	cl.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		if s.push() > 0 && s.c.NoAck() {
			s.giveCredit()
		}
		s.mu.Unlock()
	}
}

func (cl *Client) dropSub(s *sub) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.subs[s.id] == s {
		delete(cl.subs, s.id)
	}
	if cl.byConsumer[s.c] == s {
		delete(cl.byConsumer, s.c)
	}
}

// cancelled tells a sub's consumer its queue cancelled it.
func (cl *Client) cancelled(s *sub) {
	cl.dropSub(s)
	s.mu.Lock()
	wasGone := s.gone
	s.gone = true
	s.pending, s.early = nil, nil
	s.mu.Unlock()
	if !wasGone {
		s.c.Cancelled()
	}
}

// handleDeliver takes a batch of deliveries from an owner and answers
// how many the client has taken so far (automatic acks).
func (cl *Client) handleDeliver(_ context.Context, from string, req []byte) ([]byte, error) {
	if err := checkVersion(methodDeliver, req); err != nil {
		return nil, err
	}
	id, err := peekConsumer(req)
	if err != nil {
		return nil, badRequest(err)
	}
	cl.mu.Lock()
	s := cl.subs[id]
	cl.mu.Unlock()
	if s == nil || s.q.node != from {
		return nil, statusNotFound("no consumer %d", id)
	}
	_, n, ds, err := decodeDeliveries(req, s.q)
	if err != nil {
		return nil, badRequest(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return nil, statusNotFound("consumer %d cancelled", id)
	}
	if err := s.receive(n, ds); err != nil {
		return nil, badRequest(err)
	}
	s.credited, s.creditedBytes = s.handed, s.handedBytes
	return binary.BigEndian.AppendUint64(nil, s.handed), nil
}

// handleCancelled is an owner's word that a consumer's queue cancelled it.
func (cl *Client) handleCancelled(_ context.Context, from string, req []byte) ([]byte, error) {
	d := decoder{b: req}
	id := d.u64()
	if d.err != nil {
		return nil, badRequest(d.err)
	}
	cl.mu.Lock()
	s := cl.subs[id]
	cl.mu.Unlock()
	if s != nil && s.q.node == from {
		cl.cancelled(s)
	}
	return nil, nil
}

// peerChanged cancels the consumers of queues on a node that went down.
func (cl *Client) peerChanged(node string, up bool) {
	if up {
		return
	}
	cl.mu.Lock()
	var subs []*sub
	for _, s := range cl.subs {
		if s.q.node == node {
			subs = append(subs, s)
		}
	}
	cl.mu.Unlock()
	if len(subs) > 0 {
		cl.log.Warn("forward: a queue's node went down; cancelling its consumers on this node", "node", node, "consumers", len(subs))
	}
	for _, s := range subs {
		cl.cancelled(s)
	}
}

// consumerWindow is the deliveries the owner lets a consumer hold:
// automatic acks, autoAckWindow whatever the channel's prefetch (RabbitMQ
// ignores basic.qos for no-ack consumers: a qos of 1 must not make it one
// message per round trip through the owner); otherwise its prefetch's
// window.
func consumerWindow(noAck bool, prefetch int) int {
	if noAck {
		return autoAckWindow
	}
	return window(uint32(min(max(prefetch, 0), 1<<31-1)))
}

// sleep waits d; false when the Client closed meanwhile.
func (cl *Client) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-cl.ctx.Done():
		return false
	}
}
