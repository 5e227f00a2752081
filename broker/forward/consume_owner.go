package forward

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/queue"
)

func statusNotFound(format string, args ...any) error {
	return status.Error(codes.NotFound, fmt.Sprintf(format, args...))
}

// consumerKey names a consumer of another node.
type consumerKey struct {
	from string
	id   uint64
}

// window is the deliveries the owner lets a consumer that acks, with
// prefetch prefetch (0: none), hold unsettled (an automatic-ack
// consumer's is autoAckWindow: consumerWindow).
func window(prefetch uint32) int {
	if prefetch == 0 {
		return defaultWindow
	}
	return int(min(prefetch, 1<<20))
}

// readAheadMinPrefetch is the least prefetch for which the owner reads
// ahead for a consumer that acks (readAhead).
const readAheadMinPrefetch = 50

// readAhead is how many deliveries beyond its prefetch the owner sends a
// consumer that acks: its node holds them until the client's prefetch
// lets them through (the channel refuses past it; an ack there wakes the
// sub), so the client's next deliveries are on its node when it acks, not
// a round trip through the owner away (consuming a backlog with prefetch
// 100 through another node: 68k -> 77k msg/s, the owner's client 113k,
// on a 2-core machine running all three nodes). It is the prefetch again, from
// readAheadMinPrefetch up: a small prefetch asks for fair dispatch among
// consumers (prefetch 1: a worker gets its next message only once it
// acked the last), which messages held for one consumer on its node would
// break; a large one trades that for throughput already. The queue counts
// the read-ahead unacked; what the client never got goes back to the
// queue (marked redelivered, as AMQP allows) when the consumer goes.
//
// A queue whose messages can leave it while they wait (x-message-ttl
// expires them, x-max-length and x-max-length-bytes drop them from its
// head) or be overtaken (x-max-priority) gets none: held on the
// consumer's node they would reach the client expired, dropped or out of
// priority order, where RabbitMQ keeps them in the queue (readsAhead);
// nor does a message with an expiration of its own (remoteConsumer's
// Deliver takes it only within the prefetch).
func readAhead(prefetch uint32) int {
	if prefetch < readAheadMinPrefetch {
		return 0
	}
	return window(prefetch)
}

// readsAhead reports whether a queue with args may be read ahead
// (readAhead): none of its messages leaves it or is overtaken while it
// waits.
func readsAhead(args map[string]any) bool {
	for _, k := range []string{"x-message-ttl", "x-max-length", "x-max-length-bytes", "x-max-priority"} {
		if _, ok := args[k]; ok {
			return false
		}
	}
	return true
}

// maxSpareRequest bounds the capacity of a deliver request buffer kept
// for the next call (a batch of large messages allocates its own).
const maxSpareRequest = 256 << 10

// maxDeliverCalls is the deliver calls in flight per consumer: the owner
// sends the next batch while earlier ones are on their way, and the
// consumer's node hands the batches over in their order.
const maxDeliverCalls = 4

// remoteConsumer is, on the owner, a consumer of another node: a
// queue.Consumer that sends its deliveries there.
//
// Its credit: a consumer that acks holds at most window deliveries
// unsettled (sent or not); one with automatic acks at most window (and
// autoAckWindowBytes: hasRoom) that its node has not handed to the client
// yet (sent - handed), so a client that does not read leaves the messages
// in the queue, not in its node's memory.
type remoteConsumer struct {
	h      *handlers
	key    consumerKey
	q      queue.Queue
	noAck  bool
	window int
	// prefetchWindow is window without the read-ahead: past it, a
	// message that expires on its own is not taken (it expires in the
	// queue, not on the consumer's node).
	prefetchWindow int

	mu  sync.Mutex
	buf []queue.Delivery
	// spareBufs and spareReqs are the batches and request buffers of
	// answered deliver calls, for the next ones (at most maxDeliverCalls
	// each): a consumer's calls allocate nothing for them once under way.
	spareBufs [][]queue.Delivery
	spareReqs [][]byte
	unsettled map[uint64]struct{} // delivered, not acked (ack mode)
	sent      uint64              // deliveries put in deliver calls (automatic acks)
	handed    uint64              // of those, handed to the client, as its node last said
	// Automatic acks: the message bytes buffered (bufBytes), and the size
	// of each message sent and not handed yet, in order (sentSizes, their
	// sum sentBytes); bufBytes+sentBytes is held to autoAckWindowBytes
	// (hasRoom).
	bufBytes, sentBytes int
	sentSizes           []int
	calls               int    // deliver calls in flight
	batch               uint64 // the number of the next deliver call
	blocked             bool   // Deliver refused for want of credit: Wake the queue when it comes
	gone                bool
	// draining: cancelled by its node (automatic acks), the deliveries
	// the queue already counted delivered still go there; drained is
	// closed when the last deliver call is answered.
	draining bool
	drained  chan struct{}
}

func (rc *remoteConsumer) NoAck() bool { return rc.noAck }

func (rc *remoteConsumer) Deliver(d queue.Delivery) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.gone {
		return false
	}
	if rc.noAck {
		if !rc.hasRoom() {
			rc.blocked = true
			return false
		}
		rc.bufBytes += deliveryBytes(d)
	} else {
		if len(rc.unsettled) >= rc.window || len(rc.unsettled) >= rc.prefetchWindow && d.Msg != nil && d.Msg.Expiry != 0 {
			rc.blocked = true
			return false
		}
		rc.unsettled[d.Seq] = struct{}{}
	}
	rc.buf = append(rc.buf, d)
	return true
}

func (rc *remoteConsumer) Flush() {
	rc.mu.Lock()
	rc.sendLocked()
	rc.mu.Unlock()
}

// sendLocked sends what is buffered while fewer than maxDeliverCalls
// calls are under way (a gone consumer's only while it drains). The
// calls are Sent under rc.mu, so they leave in the order of their
// numbers; Sent Immediate, as the queue's loop or the transport's reader
// calls this: they never wait for room on the link (a consumer's calls
// in flight are bounded here). rc.mu held.
func (rc *remoteConsumer) sendLocked() {
	for rc.calls < maxDeliverCalls && len(rc.buf) > 0 && (!rc.gone || rc.draining) {
		batch, n := rc.take()
		rc.calls++
		var req []byte
		if k := len(rc.spareReqs); k > 0 {
			req, rc.spareReqs = rc.spareReqs[k-1][:0], rc.spareReqs[:k-1]
		}
		req = appendDeliveries(slices.Grow(req, deliveriesSize(batch)), rc.key.id, n, batch)
		ctx := transport.Immediate(transport.Within(context.Background(), rc.h.callTimeout))
		err := rc.h.nw.Send(ctx, rc.key.from, methodDeliver, req, func(ans []byte, err error) {
			rc.answered(batch, req, ans, err)
		})
		if err != nil {
			go rc.answered(batch, nil, nil, err) // it takes rc.mu
		}
	}
}

// take returns the buffered deliveries as the next deliver call's batch.
// rc.mu held.
func (rc *remoteConsumer) take() ([]queue.Delivery, uint64) {
	batch, n := rc.buf, rc.batch
	rc.buf = nil
	if k := len(rc.spareBufs); k > 0 {
		rc.buf, rc.spareBufs = rc.spareBufs[k-1], rc.spareBufs[:k-1]
	}
	rc.batch++
	if rc.noAck {
		rc.sent += uint64(len(batch))
		for _, d := range batch {
			n := deliveryBytes(d)
			rc.sentSizes = append(rc.sentSizes, n)
			rc.sentBytes += n
		}
		rc.bufBytes = 0
	}
	return batch, n
}

// hasRoom reports whether an automatic-ack consumer may take another
// delivery: fewer than its window of deliveries, and fewer than
// autoAckWindowBytes of message bytes, buffered or sent and not handed to
// the client (so at most the byte bound plus one message are out: one
// message goes whatever its size). rc.mu held.
func (rc *remoteConsumer) hasRoom() bool {
	return int(rc.sent-rc.handed)+len(rc.buf) < rc.window && rc.bufBytes+rc.sentBytes < autoAckWindowBytes
}

// deliveryBytes is what a delivery counts against autoAckWindowBytes.
func deliveryBytes(d queue.Delivery) int {
	if d.Msg == nil {
		return 0
	}
	return len(d.Msg.Body) + len(d.Msg.Props)
}

// credit records that the consumer's node has handed handed deliveries
// to its client (automatic acks) and wakes the queue if it was waiting
// for that.
func (rc *remoteConsumer) credit(handed uint64) {
	rc.mu.Lock()
	if handed > rc.sent { // more than was sent: a confused peer
		handed = rc.sent
	}
	wake := false
	if handed > rc.handed {
		k := min(int(handed-rc.handed), len(rc.sentSizes))
		for _, n := range rc.sentSizes[:k] {
			rc.sentBytes -= n
		}
		if k == len(rc.sentSizes) {
			rc.sentSizes, rc.sentBytes = rc.sentSizes[:0], 0
		} else {
			rc.sentSizes = rc.sentSizes[k:] // append reallocates past the end
		}
		rc.handed = handed
		// Woken only when the window has room again (a large message
		// let in at the byte bound may take several credits).
		wake = rc.blocked && !rc.gone && rc.hasRoom()
		if wake {
			rc.blocked = false
		}
	}
	rc.mu.Unlock()
	if wake {
		rc.q.Wake(rc)
	}
}

// answered handles a deliver call's answer, on the transport's reader:
// the client's credit (automatic acks), then the next batch. A call that
// failed is handled on a goroutine of its own (it cancels the consumer).
func (rc *remoteConsumer) answered(batch []queue.Delivery, req, ans []byte, err error) {
	if err != nil {
		go rc.failed(batch, err)
		return
	}
	if rc.noAck {
		rc.credit(decodeHanded(ans))
	}
	rc.mu.Lock()
	// The request was sent in full (the peer answered it) and the batch's
	// deliveries are the queue's again (unacked there): both serve the
	// next calls.
	if len(rc.spareBufs) < maxDeliverCalls {
		clear(batch)
		rc.spareBufs = append(rc.spareBufs, batch[:0])
	}
	// Not a call to this node itself: its handler keeps the request's
	// bytes (transport.Handler).
	if len(rc.spareReqs) < maxDeliverCalls && cap(req) <= maxSpareRequest && rc.key.from != rc.h.nw.Node() {
		rc.spareReqs = append(rc.spareReqs, req)
	}
	rc.calls--
	rc.sendLocked()
	rc.callDone()
	rc.mu.Unlock()
}

// failed handles a deliver call that failed.
func (rc *remoteConsumer) failed(batch []queue.Delivery, err error) {
	rc.mu.Lock()
	rc.calls--
	rc.callDone()
	rc.mu.Unlock()
	if status.Code(err) == codes.NotFound {
		// The consumer was cancelled on its node while this batch was on
		// its way: only this batch goes back. What the client got before
		// stays its own until it settles it (AMQP keeps a cancelled
		// consumer's unacked messages).
		rc.mu.Lock()
		seqs := make([]uint64, 0, len(batch))
		for _, d := range batch {
			if _, ok := rc.unsettled[d.Seq]; ok {
				delete(rc.unsettled, d.Seq)
				seqs = append(seqs, d.Seq)
			}
		}
		rc.mu.Unlock()
		rc.h.dropConsumer(rc, false)
		if len(seqs) > 0 {
			rc.q.Requeue(seqs)
		}
		return
	}
	rc.mu.Lock()
	first := !rc.gone // the other calls in flight fail the same way
	rc.mu.Unlock()
	rc.h.dropConsumer(rc, true)
	if first {
		rc.h.log.Warn("forward: delivering to a consumer on another node failed; cancelling it and requeueing its messages", "node", rc.key.from, "err", err)
		rc.tellCancelled()
	}
}

// callDone closes drained once no deliver call is under way. rc.mu held.
func (rc *remoteConsumer) callDone() {
	if rc.calls == 0 && rc.drained != nil {
		close(rc.drained)
		rc.drained = nil
	}
}

// drain detaches an automatic-ack consumer its node cancels from its
// queue and sends it what the queue already handed it (and so forgot),
// as RabbitMQ's channel delivers what its queue handed it before
// cancel-ok; it returns once every deliver call is answered (or ctx
// ends).
func (h *handlers) drain(ctx context.Context, rc *remoteConsumer) {
	rc.mu.Lock()
	already := rc.gone
	rc.gone, rc.draining = true, true
	rc.mu.Unlock()
	if !already {
		rc.q.Cancel(rc) // Deliver refuses from now on
	}
	rc.mu.Lock()
	rc.sendLocked()
	var wait chan struct{}
	if rc.calls > 0 {
		if rc.drained == nil {
			rc.drained = make(chan struct{})
		}
		wait = rc.drained
	}
	rc.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
		}
	}
	h.forget(rc)
}

// tellCancelled tells the consumer's node its consumer is cancelled here.
func (rc *remoteConsumer) tellCancelled() {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), rc.h.callTimeout)
		defer cancel()
		_, _ = rc.h.nw.Call(ctx, rc.key.from, methodCancelled, binary.BigEndian.AppendUint64(nil, rc.key.id))
	}()
}

// Cancelled implements queue.Consumer: the queue went away; the
// consumer's node is told.
func (rc *remoteConsumer) Cancelled() {
	rc.h.dropConsumer(rc, false)
	rc.tellCancelled()
}

// settled gives back credit for settled deliveries and appends those of
// seqs this consumer held to held.
func (rc *remoteConsumer) settled(seqs, held []uint64) []uint64 {
	rc.mu.Lock()
	n := len(held)
	for _, s := range seqs {
		if _, ok := rc.unsettled[s]; ok {
			delete(rc.unsettled, s)
			held = append(held, s)
		}
	}
	done := rc.gone && len(rc.unsettled) == 0
	wake := len(held) > n && rc.blocked && !rc.gone
	if wake {
		rc.blocked = false
	}
	rc.mu.Unlock()
	if done {
		rc.h.forget(rc)
	}
	if wake {
		rc.q.Wake(rc)
	}
	return held
}

// forget removes a consumer from the table.
func (h *handlers) forget(rc *remoteConsumer) {
	h.cons.mu.Lock()
	h.cons.remove(rc)
	h.cons.mu.Unlock()
}

// consumers is the owner's table of other nodes' consumers, and of the
// messages other nodes took with basic.get and have not settled (requeued
// when their node goes down).
type consumers struct {
	mu sync.Mutex
	m  map[consumerKey]*remoteConsumer
	// byQueue is m by node and queue: a settlement looks at the
	// consumers it may concern only.
	byQueue map[getKey]map[*remoteConsumer]struct{}
	gets    map[getKey]map[uint64]struct{}
}

// add puts rc in the table. c.mu held.
func (c *consumers) add(rc *remoteConsumer) {
	c.m[rc.key] = rc
	k := getKey{rc.key.from, rc.q}
	if c.byQueue[k] == nil {
		c.byQueue[k] = map[*remoteConsumer]struct{}{}
	}
	c.byQueue[k][rc] = struct{}{}
}

// remove takes rc out of the table. c.mu held.
func (c *consumers) remove(rc *remoteConsumer) {
	if c.m[rc.key] != rc {
		return
	}
	delete(c.m, rc.key)
	k := getKey{rc.key.from, rc.q}
	delete(c.byQueue[k], rc)
	if len(c.byQueue[k]) == 0 {
		delete(c.byQueue, k)
	}
}

type getKey struct {
	from string
	q    queue.Queue
}

func (c *consumers) got(from string, q queue.Queue, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := getKey{from, q}
	if c.gets[k] == nil {
		c.gets[k] = map[uint64]struct{}{}
	}
	c.gets[k][seq] = struct{}{}
}

// settledGets forgets the messages node from took with basic.get among
// seqs and returns those it held.
func (c *consumers) settledGets(from string, q queue.Queue, seqs []uint64) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := getKey{from, q}
	m := c.gets[k]
	if m == nil {
		return nil
	}
	var held []uint64
	for _, s := range seqs {
		if _, ok := m[s]; ok {
			delete(m, s)
			held = append(held, s)
		}
	}
	if len(m) == 0 {
		delete(c.gets, k)
	}
	return held
}

func (h *handlers) consume(ctx context.Context, from string, req []byte) ([]byte, error) {
	q, d, err := h.queue(ctx, req)
	if err != nil {
		return nil, err
	}
	id := d.u64()
	flags := d.u8()
	prio := int64(d.u64())
	prefetch := d.u32()
	if d.err != nil {
		return nil, badRequest(d.err)
	}
	noAck := flags&1 != 0
	w := consumerWindow(noAck, int(min(prefetch, 1<<31-1)))
	rc := &remoteConsumer{h: h, key: consumerKey{from, id}, q: q, noAck: noAck, window: w, prefetchWindow: w, unsettled: map[uint64]struct{}{}}
	if !noAck && readsAhead(q.Info().Args) {
		rc.window += readAhead(prefetch)
	}
	h.cons.mu.Lock()
	if _, dup := h.cons.m[rc.key]; dup {
		h.cons.mu.Unlock()
		return nil, status.Error(codes.AlreadyExists, "consumer already registered")
	}
	h.cons.add(rc)
	h.cons.mu.Unlock()
	opts := queue.ConsumeOptions{Exclusive: flags&2 != 0, Priority: int(max(min(prio, 1<<31-1), -(1 << 31))), Prefetch: int(prefetch)}
	if err := q.Consume(ctx, rc, opts); err != nil {
		h.cons.mu.Lock()
		h.cons.remove(rc)
		h.cons.mu.Unlock()
		return nil, h.toStatus(err)
	}
	return nil, nil
}

func (h *handlers) cancel(ctx context.Context, from string, req []byte) ([]byte, error) {
	_, _, d, err := decodeQueueRef(req)
	if err != nil {
		return nil, badRequest(err)
	}
	id := d.u64()
	if d.err != nil {
		return nil, badRequest(d.err)
	}
	h.cons.mu.Lock()
	rc := h.cons.m[consumerKey{from, id}]
	h.cons.mu.Unlock()
	switch {
	case rc == nil:
	case rc.noAck:
		h.drain(ctx, rc)
	default:
		h.dropConsumer(rc, false)
	}
	return nil, nil
}

// dropConsumer detaches a consumer of another node from its queue;
// requeue returns its unsettled messages (its node is gone).
//
// Without requeue, a consumer whose node still holds deliveries it has not
// settled stays in the table (detached from its queue) until they are
// settled, so that its node going down still returns them.
func (h *handlers) dropConsumer(rc *remoteConsumer, requeue bool) {
	rc.mu.Lock()
	already := rc.gone
	rc.gone = true
	var seqs []uint64
	if requeue {
		for s := range rc.unsettled {
			seqs = append(seqs, s)
		}
		rc.unsettled = map[uint64]struct{}{}
	}
	// Never sent: back to the queue in any case.
	for _, d := range rc.buf {
		if !rc.noAck || requeue {
			seqs = append(seqs, d.Seq)
		}
	}
	rc.buf, rc.bufBytes = nil, 0
	holding := len(rc.unsettled) > 0
	rc.mu.Unlock()
	if !holding {
		h.forget(rc)
	}
	if !already {
		rc.q.Cancel(rc)
	}
	if len(seqs) > 0 {
		rc.q.Requeue(seqs)
	}
}

// nodeDown drops the consumers of a node that went down.
func (h *handlers) nodeDown(node string) {
	h.cons.mu.Lock()
	var rcs []*remoteConsumer
	for k, rc := range h.cons.m {
		if k.from == node {
			rcs = append(rcs, rc)
		}
	}
	gets := map[queue.Queue][]uint64{}
	for k, m := range h.cons.gets {
		if k.from == node {
			for s := range m {
				gets[k.q] = append(gets[k.q], s)
			}
			delete(h.cons.gets, k)
		}
	}
	h.cons.mu.Unlock()
	for q, seqs := range gets {
		q.Requeue(seqs)
	}
	if len(rcs) > 0 {
		h.log.Warn("forward: a node went down; cancelling its consumers and requeueing their messages", "node", node, "consumers", len(rcs))
	}
	for _, rc := range rcs {
		h.dropConsumer(rc, true)
	}
}

// settledBy gives credit back to the consumers of other nodes whose
// deliveries a settlement from node from names, and appends the seqs they
// held to held.
func (h *handlers) settledBy(from string, q queue.Queue, seqs, held []uint64) []uint64 {
	var few [2]*remoteConsumer
	rcs := few[:0]
	h.cons.mu.Lock()
	for rc := range h.cons.byQueue[getKey{from, q}] {
		rcs = append(rcs, rc)
	}
	h.cons.mu.Unlock()
	for _, rc := range rcs {
		held = rc.settled(seqs, held)
	}
	return held
}

// credit is a consumer's node's word that its client took deliveries
// (automatic acks): the owner may send as many more.
func (h *handlers) credit(_ context.Context, from string, req []byte) ([]byte, error) {
	id, handed, err := decodeCredit(req)
	if err != nil {
		return nil, badRequest(err)
	}
	h.cons.mu.Lock()
	rc := h.cons.m[consumerKey{from, id}]
	h.cons.mu.Unlock()
	if rc != nil && rc.noAck {
		rc.credit(handed)
	}
	return nil, nil
}
