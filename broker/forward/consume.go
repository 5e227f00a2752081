package forward

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/queue"
)

// Consuming through a node that does not hold the queue: the proxy's
// Consume registers a consumer on the owner (a remoteConsumer, below)
// that sends its deliveries back in batches ("forward.deliver", one call
// in flight per consumer, so they arrive in order) to this node's sub,
// which hands them to the real consumer. The owner gives a consumer at
// most its prefetch (or defaultWindow) deliveries unsettled; a settlement
// through the proxy gives the credit back. A consumer's node that goes
// down, or a deliver call that fails, cancels it on the owner and
// requeues its unacked messages; an owner that goes down cancels its
// consumers here (basic.cancel to clients that asked for it).

const (
	methodConsume   = "forward.consume"
	methodCancel    = "forward.cancel"
	methodDeliver   = "forward.deliver"
	methodCancelled = "forward.cancelled"
)

// defaultWindow bounds the unsettled deliveries of a consumer without a
// prefetch limit (and, for automatic acks, those not yet received).
const defaultWindow = 1000

// sub is a consumer on this node of a queue another node holds.
type sub struct {
	q  *Queue
	c  queue.Consumer
	id uint64

	mu      sync.Mutex
	pending []queue.Delivery // received, refused by c so far
	gone    bool
}

// push hands pending deliveries to the consumer while it takes them. s.mu held.
func (s *sub) push() {
	n := 0
	for n < len(s.pending) && !s.gone && s.c.Deliver(s.pending[n]) {
		n++
	}
	s.pending = s.pending[n:]
	if n > 0 {
		s.c.Flush()
	}
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
	s := &sub{q: q, c: c, id: cl.nextID.Add(1)}
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
	req := appendQueueRef(nil, q.info.Vhost, q.info.Name)
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
// that the consumer never took is requeued there.
func (q *Queue) Cancel(c queue.Consumer) {
	cl := q.c
	cl.mu.Lock()
	s := cl.byConsumer[c]
	cl.mu.Unlock()
	if s == nil {
		return
	}
	cl.dropSub(s)
	s.mu.Lock()
	s.gone = true
	var seqs []uint64
	for _, d := range s.pending {
		seqs = append(seqs, d.Seq)
	}
	s.pending = nil
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
		s.push()
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
	s.pending = nil
	s.mu.Unlock()
	if !wasGone {
		s.c.Cancelled()
	}
}

// handleDeliver takes a batch of deliveries from an owner.
func (cl *Client) handleDeliver(_ context.Context, from string, req []byte) ([]byte, error) {
	d := decoder{b: req}
	id := d.u64()
	n := d.u32()
	if d.err != nil || uint64(n)*13 > uint64(len(d.b)) {
		return nil, badRequest(fmt.Errorf("%w: deliveries", errMalformed))
	}
	cl.mu.Lock()
	s := cl.subs[id]
	cl.mu.Unlock()
	if s == nil || s.q.node != from {
		return nil, statusNotFound("no consumer %d", id)
	}
	ds := make([]queue.Delivery, 0, n)
	for range n {
		seq := d.u64()
		redelivered := d.u8() == 1
		raw := d.bytes(int(d.u32()))
		if d.err != nil {
			return nil, badRequest(d.err)
		}
		m, err := message.Decode(raw)
		if err != nil {
			return nil, badRequest(err)
		}
		ds = append(ds, queue.Delivery{Msg: m, Queue: s.q, Seq: seq, Redelivered: redelivered})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return nil, statusNotFound("consumer %d cancelled", id)
	}
	s.pending = append(s.pending, ds...)
	s.push()
	return nil, nil
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
