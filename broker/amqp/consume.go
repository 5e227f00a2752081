package amqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
)

// consumer is a basic.consume subscription; it implements queue.Consumer.
type consumer struct {
	ch       *channel
	tag      string
	q        queue.Queue
	qt       int // q's type, the delivery counters' index (QueueTypeClassic ...)
	noAck    bool
	prefetch int32 // per-consumer limit, 0 = none
	// exclusive and args are basic.consume's, for the HTTP API's list.
	exclusive bool
	args      map[string]any
	unacked   int32       // deliveries not settled yet; guarded by ch.mu
	starved   atomic.Bool // Deliver returned false; wake the queue when credit frees
	gone      atomic.Bool
	ready     atomic.Bool // consume-ok was sent: deliveries may follow it
	// handOver is set by basic.cancel (not by a channel's close): what
	// the queue already handed this automatic-ack consumer is delivered
	// before cancel-ok (DeliverFinal).
	handOver atomic.Bool
	// remote is set for a queue another node holds (its proxy): the
	// reader does not busy-poll for this consumer's acks (see takeCredit).
	remote bool

	// A starved consumer is woken once a batch of its prefetch is back
	// (refillBatch), or refillDelay after the first credit came back,
	// whichever is first: one wake-up and one socket write per batch of
	// deliveries instead of one per ack. The client still holds the rest
	// of its prefetch while the batch comes back, so it never waits for it.
	refillArmed atomic.Bool
	refillTimer *time.Timer // set at creation, stopped; refillArmed guards Reset
	wakeFn      func()      // c.wake, bound once (a method value allocates)
}

// refillDelay bounds how long credit that came back may wait to be used.
const refillDelay = time.Millisecond

// refillBatch is how much of its prefetch a starved consumer must get back
// before the queue is woken without waiting for refillDelay.
func (c *consumer) refillBatch() int32 { return max(1, c.prefetch/4) }

// credited is called by settle after unacked fell to left: it reports
// whether the queue should be woken now for this starved consumer, and
// arms the refill timer otherwise.
func (c *consumer) credited(left int32) bool {
	if !c.starved.Load() {
		return false
	}
	if c.prefetch == 0 || c.prefetch-left >= c.refillBatch() {
		return c.starved.CompareAndSwap(true, false)
	}
	if c.refillArmed.CompareAndSwap(false, true) {
		c.refillTimer.Reset(refillDelay)
	}
	return false
}

func (c *consumer) refillExpired() {
	c.refillArmed.Store(false)
	if c.starved.CompareAndSwap(true, false) {
		c.wake()
	}
}

func (c *consumer) NoAck() bool { return c.noAck }

// Deliver implements queue.Consumer: it takes credit, assigns the delivery
// tag and writes the frames into the connection's output buffer.
func (c *consumer) Deliver(d queue.Delivery) bool {
	if c.gone.Load() || !c.ready.Load() {
		return false
	}
	return c.ch.deliver(c.tag, c, &d)
}

// DeliverEach implements queue.BatchConsumer.
func (c *consumer) DeliverEach(next func() *queue.Delivery) bool {
	if c.gone.Load() || !c.ready.Load() {
		return true
	}
	return c.ch.deliverEach(c, next)
}

// DeliverFinal implements queue.FinalConsumer: deliveries a queue on
// another node already counted delivered to this automatic-ack consumer
// go to the client ahead of cancel-ok, past the output limit (at most the
// forwarding window); at a channel's close they are dropped, as RabbitMQ
// drops what was on its way to a closed channel.
func (c *consumer) DeliverFinal(ds []queue.Delivery) {
	if !c.noAck || !c.handOver.Load() {
		return
	}
	ch := c.ch
	ch.mu.Lock()
	ch.c.outMu.Lock()
	for i := range ds {
		ch.appendDeliveryLocked(c.tag, c, &ds[i], true)
		ch.stats.deliverGet++
		if ds[i].Redelivered {
			ch.stats.redeliver++
		}
	}
	ch.c.outMu.Unlock()
	ch.mu.Unlock()
	ch.c.srv.Counters.ByQueueType[c.qt].ConsumeAutoAck.Add(uint64(len(ds)))
	c.Flush()
}

// Flush implements queue.Consumer: the queue's batch of deliveries goes
// to the socket now, from the queue's goroutine if the socket takes it
// without blocking, else from the writer goroutine.
// While the reader settles acks it is left to the reader (conn.settleWaking).
func (c *consumer) Flush() {
	conn := c.ch.c
	if conn.settleWaking.Load() {
		conn.flushDeferred.Store(true)
		return
	}
	conn.flush()
}

// Cancelled implements queue.Consumer: the queue went away.
func (c *consumer) Cancelled() {
	if c.gone.Swap(true) {
		return
	}
	ch := c.ch
	if ch.c.capCancel {
		ch.c.sendMethod(ch.id, &wire.BasicCancel{ConsumerTag: c.tag, NoWait: true})
	}
}

func (c *consumer) wake() {
	if !c.gone.Load() {
		c.q.Wake(c)
	}
}

// takeCredit takes one unit of credit from the consumer's and the
// channel's prefetch limits, or marks the consumer starved. ch.mu is held:
// settle gives credit back under the same lock and, seeing the mark, wakes
// the consumer's queue. Plain counters under the lock the delivery takes
// anyway, not atomics: this runs once per delivery.
func (c *consumer) takeCredit() bool {
	ch := c.ch
	g := ch.globalPrefetch.Load()
	if c.prefetch > 0 && c.unacked >= c.prefetch || g > 0 && ch.unackedCount >= g {
		c.starved.Store(true)
		// A spin saves the reader's wake-up when the client's ack lets
		// the queue deliver at once. For another node's queue most of
		// the next batch waits on that node, which gets its credit back
		// with the forwarded ack: PerfTest's s5 through a node that does
		// not hold the queue spun 0.08 empty reads a message there, and
		// without them its brokers took 1.5% less CPU a message at the
		// same rate.
		if !c.remote {
			ch.c.wantAcks.Store(true)
		}
		return false
	}
	c.unacked++
	ch.unackedCount++
	return true
}

// unackedMsg is one delivery awaiting ack.
type unackedMsg struct {
	tag  uint64
	q    queue.Queue
	seq  uint64
	cons *consumer // nil for basic.get
	done bool
}

// unackedList holds deliveries in tag order.
type unackedList struct {
	items []unackedMsg
	head  int
	live  int
}

func (l *unackedList) len() int { return l.live }

// push appends a delivery (tags only grow).
//
// It takes the fields, not an unackedMsg: a struct literal is built on the
// stack and copied, and copying a struct just written field by field stalls
// the CPU's store forwarding, a measurable cost on the delivery path.
func (l *unackedList) push(tag uint64, q queue.Queue, seq uint64, cons *consumer) {
	if len(l.items) == cap(l.items) {
		l.items = append(l.items, unackedMsg{})
	} else {
		l.items = l.items[:len(l.items)+1]
	}
	m := &l.items[len(l.items)-1]
	m.tag, m.q, m.seq, m.cons, m.done = tag, q, seq, cons, false
	l.live++
}

// find returns the index of tag, or -1.
func (l *unackedList) find(tag uint64) int {
	lo, hi := l.head, len(l.items)
	for lo < hi {
		mid := (lo + hi) / 2
		if l.items[mid].tag < tag {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(l.items) && l.items[lo].tag == tag && !l.items[lo].done {
		return lo
	}
	return -1
}

// take removes entries: tag alone, or every live one up to tag when multiple
// (tag 0 with multiple means all).
//
// fn gets each entry by pointer, valid during the call only.
func (l *unackedList) take(tag uint64, multiple bool, fn func(*unackedMsg)) bool {
	if !multiple {
		i := l.find(tag)
		if i < 0 {
			return false
		}
		fn(&l.items[i])
		l.items[i].done = true
		l.live--
		l.compact()
		return true
	}
	found := tag == 0
	for i := l.head; i < len(l.items) && (tag == 0 || l.items[i].tag <= tag); i++ {
		if l.items[i].done {
			continue
		}
		if l.items[i].tag == tag {
			found = true
		}
		fn(&l.items[i])
		l.items[i].done = true
		l.live--
	}
	l.compact()
	return found || tag == 0
}

func (l *unackedList) compact() {
	for l.head < len(l.items) && l.items[l.head].done {
		l.items[l.head] = unackedMsg{}
		l.head++
	}
	if l.head == len(l.items) {
		l.items = l.items[:0]
		l.head = 0
	} else if l.head > 1024 && l.head*2 > len(l.items) {
		n := copy(l.items, l.items[l.head:])
		l.items = l.items[:n]
		l.head = 0
	}
}

// deliver assigns the next delivery tag and writes basic.deliver (consumer)
// or basic.get-ok (tag == "" and cons == nil) with the content frames. A
// consumer's delivery is refused (false) while the connection's output is
// over its high-water mark (the consumer is woken once it drained) and
// when it has no credit left (see takeCredit).
func (ch *channel) deliver(ctag string, cons *consumer, d *queue.Delivery) bool {
	noAck := cons != nil && cons.noAck
	ch.mu.Lock()
	ch.c.outMu.Lock()
	if cons != nil && (ch.c.outputFullLocked(cons.wakeFn) || !noAck && !cons.takeCredit()) {
		ch.c.outMu.Unlock()
		ch.mu.Unlock()
		return false
	}
	ch.appendDeliveryLocked(ctag, cons, d, noAck)
	ch.stats.deliverGet++
	if d.Redelivered {
		ch.stats.redeliver++
	}
	if cons == nil {
		ch.c.checkOutputLocked() // basic.get-ok: the client's own frames asked for it
	}
	ch.c.outMu.Unlock()
	ch.mu.Unlock()
	if cons == nil {
		ch.c.signal() // basic.get-ok: the reader may be about to wait on a queue
	}
	if cons != nil { // basic.get counts in basicGet, which knows the queue
		dc := &ch.c.srv.Counters.ByQueueType[cons.qt]
		if noAck {
			dc.ConsumeAutoAck.Add(1)
		} else {
			dc.ConsumeManualAck.Add(1)
		}
		if d.Redelivered {
			dc.Redelivered.Add(1)
		}
	}
	return true
}

// deliverEachMax bounds a run of deliverEach under one hold of the locks,
// so the writer and the connection's other channels wait for a run of
// this many messages at most.
const deliverEachMax = 128

// deliverEach is deliver for the deliveries next makes, with the locks
// taken once per run (see queue.BatchConsumer). next runs under ch.mu and
// conn.outMu and may read the disk (a stream's next chunk): the runs are
// bounded by deliverEachMax, and the writer waits at most that long to swap
// buffers. It reports whether it stopped because the consumer's credit or
// the connection's output ran out.
func (ch *channel) deliverEach(cons *consumer, next func() *queue.Delivery) (refused bool) {
	var n, redelivered uint64
	for done := false; !done && !refused; {
		ch.mu.Lock()
		ch.c.outMu.Lock()
		for i := 0; i < deliverEachMax; i++ {
			if ch.c.outputFullLocked(cons.wakeFn) || !cons.noAck && !cons.takeCredit() {
				refused = true
				break
			}
			d := next()
			if d == nil {
				if !cons.noAck {
					cons.unacked-- // the credit taken for it goes back
					ch.unackedCount--
				}
				done = true
				break
			}
			ch.appendDeliveryLocked(cons.tag, cons, d, cons.noAck)
			n++
			ch.stats.deliverGet++
			if d.Redelivered {
				redelivered++
				ch.stats.redeliver++
			}
		}
		ch.c.outMu.Unlock()
		ch.mu.Unlock()
	}
	dc := &ch.c.srv.Counters.ByQueueType[cons.qt]
	if n > 0 {
		if cons.noAck {
			dc.ConsumeAutoAck.Add(n)
		} else {
			dc.ConsumeManualAck.Add(n)
		}
	}
	if redelivered > 0 {
		dc.Redelivered.Add(redelivered)
	}
	return refused
}

// appendDeliveryLocked assigns d the next delivery tag, records it as
// unacked (unless noAck) and appends its basic.deliver (a consumer's) or
// basic.get-ok (cons == nil) and content frames to the output. ch.mu and
// ch.c.outMu are held; the credit is taken.
func (ch *channel) appendDeliveryLocked(ctag string, cons *consumer, d *queue.Delivery, noAck bool) {
	msg := d.Msg
	ch.nextTag++
	tag := ch.nextTag
	if !noAck {
		ch.unacked.push(tag, d.Queue, d.Seq, cons)
	}
	b := ch.c.out
	if cons != nil {
		// Field by field, not a composite literal: see unackedList.push.
		m := &ch.deliverM
		m.ConsumerTag, m.DeliveryTag, m.Redelivered = ctag, tag, d.Redelivered
		m.Exchange, m.RoutingKey = msg.Exchange, msg.RoutingKey
		b = wire.AppendMethodFrame(b, ch.id, m)
	} else {
		ch.getOkM = wire.BasicGetOk{DeliveryTag: tag, Redelivered: d.Redelivered, Exchange: msg.Exchange, RoutingKey: msg.RoutingKey, MessageCount: uint32(d.Remaining)}
		b = wire.AppendMethodFrame(b, ch.id, &ch.getOkM)
	}
	b = wire.AppendHeaderFrame(b, ch.id, wire.ClassBasic, uint64(len(msg.Body)), msg.Props)
	ch.c.out = wire.AppendBodyFrames(b, ch.id, msg.Body, ch.c.frameMax)
}

func (ch *channel) basicQos(m *wire.BasicQos) error {
	if m.Global {
		ch.globalPrefetch.Store(int32(m.PrefetchCount))
		ch.wakeConsumers()
	} else {
		ch.mu.Lock() // info reads it from the HTTP API's goroutines
		ch.prefetchCount = int32(m.PrefetchCount)
		ch.mu.Unlock()
	}
	ch.c.sendMethod(ch.id, &wire.BasicQosOk{})
	return nil
}

func newConsumerTag() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "amq.ctag-" + hex.EncodeToString(b[:])
}

func (ch *channel) basicConsume(ctx context.Context, m *wire.BasicConsume) error {
	if m.Queue == replyToQueue {
		return ch.replyConsume(m)
	}
	if err := ch.access(meta.Read, "queue", m.Queue); err != nil {
		return err
	}
	q, err := ch.c.vh.Queue(ctx, m.Queue, ch.c.id)
	if err != nil {
		return fromErr(err)
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = newConsumerTag()
	}
	if ch.hasConsumerTag(tag) {
		return newError(wire.NotAllowed, "attempt to reuse consumer tag '%s'", tag)
	}
	cons := &consumer{ch: ch, tag: tag, q: q, qt: queueTypeIndex(q), noAck: m.NoAck, prefetch: ch.prefetchCount, exclusive: m.Exclusive, args: m.Arguments}
	cons.remote = onAnotherNode(q)
	cons.wakeFn = cons.wake
	cons.refillTimer = time.AfterFunc(time.Hour, cons.refillExpired)
	cons.refillTimer.Stop()
	opts := queue.ConsumeOptions{Exclusive: m.Exclusive, Args: m.Arguments, Prefetch: int(ch.prefetchCount)}
	if p, ok := m.Arguments["x-priority"]; ok {
		if n, ok := message.FieldInt(p); ok {
			opts.Priority = int(n)
		}
	}
	if err := q.Consume(ctx, cons, opts); err != nil {
		return fromErr(err)
	}
	ch.setConsumer(tag, cons)
	// consume-ok must precede the first delivery: the consumer takes nothing
	// until it is ready.
	if !m.NoWait {
		ch.c.sendMethod(ch.id, &wire.BasicConsumeOk{ConsumerTag: tag})
	}
	cons.ready.Store(true)
	q.Wake(cons)
	return nil
}

func (ch *channel) basicCancel(m *wire.BasicCancel) error {
	if ch.reply != nil && ch.reply.cons.tag == m.ConsumerTag {
		ch.replyCancel()
	} else if cons, ok := ch.consumers[m.ConsumerTag]; ok {
		ch.setConsumer(m.ConsumerTag, nil)
		cons.gone.Store(true)
		cons.handOver.Store(true)
		cons.q.Cancel(cons)
	}
	if !m.NoWait {
		ch.c.sendMethod(ch.id, &wire.BasicCancelOk{ConsumerTag: m.ConsumerTag})
	}
	return nil
}

func (ch *channel) basicGet(ctx context.Context, m *wire.BasicGet) error {
	if err := ch.access(meta.Read, "queue", m.Queue); err != nil {
		return err
	}
	q, err := ch.c.vh.Queue(ctx, m.Queue, ch.c.id)
	if err != nil {
		return fromErr(err)
	}
	d, ok, err := q.Get(ctx, m.NoAck)
	if err != nil {
		return fromErr(err)
	}
	dc := &ch.c.srv.Counters.ByQueueType[queueTypeIndex(q)]
	if !ok {
		dc.GetEmpty.Add(1)
		ch.c.sendMethod(ch.id, &wire.BasicGetEmpty{})
		return nil
	}
	if d.Redelivered {
		dc.Redelivered.Add(1)
	}
	if m.NoAck {
		dc.GetAutoAck.Add(1)
		ch.deliverGetNoAck(d)
		return nil
	}
	dc.GetManualAck.Add(1)
	_ = ch.deliver("", nil, &d) // basic.get-ok is never refused
	return nil
}

func (ch *channel) deliverGetNoAck(d queue.Delivery) {
	fm := ch.c.frameMax
	ch.mu.Lock()
	ch.nextTag++
	tag := ch.nextTag
	ch.stats.deliverGet++
	if d.Redelivered {
		ch.stats.redeliver++
	}
	ch.mu.Unlock()
	msg := d.Msg
	ch.c.send(func(b []byte) []byte {
		b = wire.AppendMethodFrame(b, ch.id, &wire.BasicGetOk{DeliveryTag: tag, Redelivered: d.Redelivered, Exchange: msg.Exchange, RoutingKey: msg.RoutingKey, MessageCount: uint32(d.Remaining)})
		b = wire.AppendHeaderFrame(b, ch.id, wire.ClassBasic, uint64(len(msg.Body)), msg.Props)
		return wire.AppendBodyFrames(b, ch.id, msg.Body, fm)
	})
}

type settleKind int

const (
	settleAck settleKind = iota
	settleReject
)

func (ch *channel) basicAck(tag uint64, multiple bool) error {
	if ch.txMode {
		if err := ch.checkTag(tag, multiple); err != nil {
			return err
		}
		ch.tx.acks = append(ch.tx.acks, txAck{tag: tag, multiple: multiple})
		return nil
	}
	return ch.settleFromClient(tag, multiple, settleAck, false)
}

func (ch *channel) basicReject(tag uint64, multiple, requeue bool) error {
	if ch.txMode {
		if err := ch.checkTag(tag, multiple); err != nil {
			return err
		}
		ch.tx.acks = append(ch.tx.acks, txAck{tag: tag, multiple: multiple, reject: true, requeue: requeue})
		return nil
	}
	return ch.settleFromClient(tag, multiple, settleReject, requeue)
}

// settleFromClient is settle for the client's ack, nack or reject, on the
// reader's goroutine: consumers' flushes are left to the reader meanwhile
// (see conn.settleWaking).
func (ch *channel) settleFromClient(tag uint64, multiple bool, kind settleKind, requeue bool) error {
	// The ack came: a consumer starved again by the deliveries it allows
	// sets wantAcks anew.
	ch.c.wantAcks.Store(false)
	ch.c.settleWaking.Store(true)
	err := ch.settle(tag, multiple, kind, requeue)
	ch.c.settleWaking.Store(false)
	return err
}

func (ch *channel) checkTag(tag uint64, multiple bool) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if (multiple && tag == 0) || ch.unacked.find(tag) >= 0 {
		return nil
	}
	return newError(wire.PreconditionFailed, "unknown delivery tag %d", tag)
}

// settle acks or rejects deliveries and returns credit.
func (ch *channel) settle(tag uint64, multiple bool, kind settleKind, requeue bool) error {
	type batch struct {
		q    queue.Queue
		seqs []uint64
	}
	// Credit goes back per consumer once for the whole settlement, not
	// per delivery.
	type credit struct {
		cons *consumer
		n    int32
	}
	var batches []batch
	var credits []credit
	var freed int32
	var wake []*consumer
	ch.mu.Lock()
	sizeHint := 1 // capacity of a queue's seqs: a multiple ack usually settles a batch
	if multiple {
		sizeHint = min(ch.unacked.len(), 1024)
	}
	ok := ch.unacked.take(tag, multiple, func(m *unackedMsg) {
		if kind == settleAck {
			ch.stats.ack++
		}
		i := 0
		for i < len(batches) && batches[i].q != m.q {
			i++
		}
		if i == len(batches) {
			batches = append(batches, batch{q: m.q, seqs: make([]uint64, 0, sizeHint)})
		}
		batches[i].seqs = append(batches[i].seqs, m.seq)
		if m.cons != nil {
			freed++ // counted against the prefetch (basic.get-ok is not)
			j := 0
			for j < len(credits) && credits[j].cons != m.cons {
				j++
			}
			if j == len(credits) {
				credits = append(credits, credit{cons: m.cons})
			}
			credits[j].n++
		}
	})
	for _, cr := range credits {
		cr.cons.unacked -= cr.n
		if cr.cons.credited(cr.cons.unacked) {
			wake = append(wake, cr.cons)
		}
	}
	ch.unackedCount -= freed
	ch.mu.Unlock()
	if !ok {
		return newError(wire.PreconditionFailed, "unknown delivery tag %d", tag)
	}
	for _, b := range batches {
		switch {
		case kind == settleAck:
			// Acks are batched per queue and handed over with the
			// connection's publishes (see conn.flushPending).
			ch.c.acks.add(b.q, b.seqs)
			ch.c.srv.Counters.ByQueueType[queueTypeIndex(b.q)].Acked.Add(uint64(len(b.seqs)))
		case requeue:
			b.q.Requeue(b.seqs)
		default:
			b.q.Reject(b.seqs)
		}
	}
	if ch.globalPrefetch.Load() > 0 {
		ch.wakeConsumers()
	} else {
		for _, c := range wake {
			c.wake()
		}
	}
	return nil
}

// requeueAll returns every unacked delivery to its queue (channel close, basic.recover).
func (ch *channel) requeueAll() {
	_ = ch.settle(0, true, settleReject, true)
}

func (ch *channel) wakeConsumers() {
	for _, c := range ch.consumers {
		c.starved.Store(false)
		c.wake()
	}
}
