package amqp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
)

// The errors NewMessage wraps.
var (
	ErrMalformedProperties = errors.New("malformed content properties")
	ErrInvalidExpiration   = errors.New("invalid expiration")
)

// NewMessage builds the message a publish with these raw basic properties
// carries, accepted now: delivery mode 2 makes it persistent, the priority
// property its priority, the expiration property (milliseconds) its expiry.
// Errors wrap ErrMalformedProperties or ErrInvalidExpiration. The HTTP
// API's publish builds its messages here too.
func NewMessage(id uint64, exchange, key string, props, body []byte) (*message.Message, error) {
	msg := &message.Message{ID: id, Exchange: exchange, RoutingKey: key, Props: props, Body: body, Timestamp: time.Now().UnixNano()}
	if mode, err := wire.PropertiesDeliveryMode(props); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedProperties, err)
	} else if mode == 2 {
		msg.Persistent = true
	}
	if prio, ok, err := wire.PropertiesPriority(props); err == nil && ok {
		msg.Priority = prio
	}
	if exp, ok, err := wire.PropertiesExpiration(props); err == nil && ok {
		ms, perr := strconv.ParseInt(exp, 10, 64)
		if perr != nil || ms < 0 {
			return nil, fmt.Errorf("%w '%s'", ErrInvalidExpiration, exp)
		}
		msg.Expiry = msg.Timestamp + ms*int64(time.Millisecond)
	}
	return msg, nil
}

// publishing is the content being assembled after basic.publish.
type publishing struct {
	active    bool
	haveHdr   bool
	exchange  string
	key       string
	mandatory bool
	headers   bool // the exchange is a headers exchange: decode headers to route
	props     []byte
	size      uint64
	body      []byte
}

func (ch *channel) basicPublish(m *wire.BasicPublish) error {
	if m.Immediate {
		// RabbitMQ never implemented immediate (3.0 dropped it): a
		// connection error, before any other check.
		return newError(wire.NotImplemented, "immediate=true")
	}
	if err := ch.access(meta.Write, "exchange", m.Exchange); err != nil {
		return err
	}
	x, err := ch.c.vh.Exchange(m.Exchange)
	if err != nil {
		return fromErr(err)
	}
	if x.Internal {
		return newError(wire.AccessRefused, "cannot publish to internal exchange '%s' in vhost '%s'", m.Exchange, ch.c.vh.Name())
	}
	ch.pub = publishing{active: true, exchange: m.Exchange, key: m.RoutingKey, mandatory: m.Mandatory, headers: x.Kind == routing.Headers}
	return nil
}

func (ch *channel) handleHeader(ctx context.Context, payload []byte) error {
	if !ch.pub.active || ch.pub.haveHdr {
		return newError(wire.UnexpectedFrame, "unexpected content header frame on channel %d", ch.id)
	}
	h, err := wire.DecodeContentHeader(payload)
	if errors.Is(err, wire.ErrTooDeep) {
		// Well framed, but past what Warren decodes: refused here, or the
		// message could never be dead-lettered or shown.
		ch.pub = publishing{}
		return newError(wire.PreconditionFailed, "invalid headers property: %v", err)
	}
	if err != nil {
		return newError(wire.FrameError, "malformed content header: %v", err)
	}
	if h.ClassID != wire.ClassBasic {
		return newError(wire.UnexpectedFrame, "content header for class %d", h.ClassID)
	}
	// Unsigned: a declared size of 2^63 or more is as much too large as
	// any other (MaxMessageSize is positive, validated by config).
	if h.BodySize > uint64(ch.c.srv.cfg.MaxMessageSize) {
		ch.pub = publishing{}
		return newError(wire.PreconditionFailed, "message size %d is larger than configured max size %d", h.BodySize, ch.c.srv.cfg.MaxMessageSize)
	}
	ch.pub.haveHdr = true
	ch.pub.props = append([]byte(nil), h.Properties...)
	ch.pub.size = h.BodySize
	if h.BodySize == 0 {
		return ch.finishPublish(ctx)
	}
	// Nothing is allocated for the body until its bytes arrive
	// (appendBody): a header alone costs its client nothing but the frame.
	return nil
}

func (ch *channel) handleBody(ctx context.Context, payload []byte) error {
	if !ch.pub.active || !ch.pub.haveHdr {
		return newError(wire.UnexpectedFrame, "unexpected content body frame on channel %d", ch.id)
	}
	var ok bool
	if ch.pub.body, ok = appendBody(ch.pub.body, payload, ch.pub.size); !ok {
		return newError(wire.FrameError, "content body exceeds declared size %d", ch.pub.size)
	}
	if uint64(len(ch.pub.body)) == ch.pub.size {
		return ch.finishPublish(ctx)
	}
	return nil
}

// finishPublish builds the message and routes it (or keeps it for tx.commit).
func (ch *channel) finishPublish(ctx context.Context) error {
	p := ch.pub
	ch.pub = publishing{}
	if r := ch.c.srv.blocked.Load(); r != nil {
		// As RabbitMQ: a connection is told it is blocked when it publishes
		// under an alarm, and its reader stops until the alarm clears.
		ch.c.alarmChanged(*r)
	}
	if ch.c.srv.blocked.Load() != nil {
		ch.c.flush()
	}
	if err := ch.c.srv.waitUnblocked(ctx, ch.c.done); err != nil {
		return err
	}
	props, err := ch.rewriteReplyTo(p.props)
	if err != nil {
		return err
	}
	msg, err := NewMessage(ch.c.srv.backend.NewMessageID(), p.exchange, p.key, props, p.body)
	switch {
	case errors.Is(err, ErrMalformedProperties):
		return newError(wire.FrameError, "%v", err)
	case err != nil:
		return newError(wire.PreconditionFailed, "%v", err)
	}
	if err := ch.c.checkUserID(props); err != nil {
		return err
	}
	var headers map[string]any
	if p.headers {
		if props, err := wire.DecodeProperties(p.props); err == nil {
			headers = props.Headers
		}
	}
	ch.c.srv.Counters.Published.Add(1)
	ch.c.pubStats.observe(len(p.body), ch.confirmMode)
	if !ch.published.Load() {
		ch.published.Store(true)
	}
	if ch.txMode {
		ch.tx.publishes = append(ch.tx.publishes, txPublish{msg: msg, mandatory: p.mandatory, headers: headers})
		return nil
	}
	return ch.route(ctx, msg, p.mandatory, headers, nil)
}

// checkUserID refuses, as RabbitMQ does, a message whose user_id property
// names another user than the connection's, unless the connection's user
// is an impersonator: consumers may trust user_id. Without the property it
// costs a look at the property flags.
func (c *conn) checkUserID(props []byte) error {
	uid, ok, err := wire.PropertiesUserID(props)
	switch {
	case err != nil:
		return newError(wire.FrameError, "%v: %v", ErrMalformedProperties, err)
	case !ok || uid == c.user || c.impersonator:
		return nil
	}
	return newError(wire.PreconditionFailed, "user_id property set to '%s' but authenticated user was '%s'", uid, c.user)
}

// route delivers msg to its queues. In confirm mode the message gets the
// next confirm tag; tracker, when set, receives the confirms instead (tx).
func (ch *channel) route(ctx context.Context, msg *message.Message, mandatory bool, headers map[string]any, tracker queue.Confirmer) error {
	if isReplyName(msg.Exchange, msg.RoutingKey) {
		return ch.routeReply(msg, mandatory)
	}
	var buf [4]queue.Queue
	qs, err := ch.c.vh.Route(ctx, msg.Exchange, msg.RoutingKey, headers, buf[:0])
	if err != nil {
		return fromErr(err)
	}
	ch.countPublish(msg.Exchange, len(qs) > 0, mandatory)
	var tag uint64
	var confirmer queue.Confirmer
	switch {
	case tracker != nil:
		confirmer = tracker
	case ch.confirmMode:
		// Queues that neither fsync nor may refuse the message confirm it
		// here, on enqueue, saving the round trip through their goroutine.
		waiting := 0
		for _, q := range qs {
			if !confirmsAtEnqueue(q, msg) {
				waiting++
			}
		}
		tag = ch.confirms.add(waiting)
		confirmer = &ch.confirms
		if waiting == 0 && len(qs) > 0 {
			for _, q := range qs {
				ch.c.batch.add(q, queue.Publish{Msg: msg})
			}
			ch.confirms.confirm(nil, true, false)
			return ch.maybeFlush(ctx)
		}
	}
	if len(qs) == 0 {
		ch.c.srv.Counters.Unroutable.Add(1)
		if mandatory {
			ch.c.srv.Counters.Returned.Add(1)
			ch.sendReturn(msg, wire.NoRoute, "NO_ROUTE")
		}
		if confirmer != nil && tracker == nil {
			ch.confirms.Confirm([]uint64{tag}, true)
		}
		return nil
	}
	for _, q := range qs {
		p := queue.Publish{Msg: msg}
		if confirmer != nil && (tracker != nil || !confirmsAtEnqueue(q, msg)) {
			p.Confirm, p.Tag = confirmer, tag
		}
		ch.c.batch.add(q, p)
	}
	return ch.maybeFlush(ctx)
}

func (ch *channel) maybeFlush(ctx context.Context) error {
	if ch.c.batch.n >= maxPublishBatch {
		return ch.c.flushPublishes(ctx)
	}
	return nil
}

// confirmsAtEnqueue asks a queue type whether it confirms msg on enqueue.
func confirmsAtEnqueue(q queue.Queue, msg *message.Message) bool {
	c, ok := q.(interface {
		ConfirmsAtEnqueue(*message.Message) bool
	})
	return ok && c.ConfirmsAtEnqueue(msg)
}

// maxPublishBatch bounds how many publishes a connection holds before
// handing them to their queues.
const maxPublishBatch = 256

// publishBatch collects a connection's publishes per queue so a queue gets
// them in one inbox operation. The reader flushes it when its socket buffer
// runs dry, when the batch is full, and before any other method, so queue
// commands keep their order.
type publishBatch struct {
	n      int
	queues []queueBatch
}

type queueBatch struct {
	q    queue.Queue
	pubs []queue.Publish
}

func (b *publishBatch) add(q queue.Queue, p queue.Publish) {
	b.n++
	for i := range b.queues {
		if b.queues[i].q == q {
			b.queues[i].pubs = append(b.queues[i].pubs, p)
			return
		}
	}
	b.queues = append(b.queues, queueBatch{q: q, pubs: []queue.Publish{p}})
}

// flushPublishes hands batched acks and publishes to their queues, then
// applies flow control (Throttle) per queue.
func (c *conn) flushPublishes(ctx context.Context) error {
	c.acks.flush()
	if c.batch.n == 0 {
		return nil
	}
	qs := c.batch.queues
	c.batch = publishBatch{queues: qs[:0:0]}
	// The confirms the channels gave at enqueue go out once every queue
	// has its messages (a basic.get that follows a confirm finds the
	// message, as with RabbitMQ), and before a lone message's deliveries
	// when its turn runs here. The reader holds no lock here: an idle
	// queue may take the batch on this goroutine.
	for i, qb := range qs {
		var enqueued func()
		if i == len(qs)-1 {
			enqueued = c.flushFn
		}
		if ip, ok := qb.q.(queue.InlinePublisher); ok {
			ip.PublishInline(qb.pubs, enqueued)
		} else {
			qb.q.Publish(qb.pubs)
			if enqueued != nil {
				enqueued()
			}
		}
	}
	c.flush() // before any Throttle wait
	for _, qb := range qs {
		if err := qb.q.Throttle(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (ch *channel) sendReturn(msg *message.Message, code uint16, text string) {
	fm := ch.c.frameMax
	ch.c.send(func(b []byte) []byte {
		b = wire.AppendMethodFrame(b, ch.id, &wire.BasicReturn{ReplyCode: code, ReplyText: text, Exchange: msg.Exchange, RoutingKey: msg.RoutingKey})
		b = wire.AppendHeaderFrame(b, ch.id, wire.ClassBasic, uint64(len(msg.Body)), msg.Props)
		return wire.AppendBodyFrames(b, ch.id, msg.Body, fm)
	})
}

// confirmTracker turns per-queue confirms into basic.ack/nack frames.
// Tags are handed out in order; a tag is settled when every queue it went to
// has confirmed it. Acks go out with multiple=true up to the highest settled
// tag below the lowest unsettled one; a nacked tag is nacked on its own.
type confirmTracker struct {
	ch *channel

	mu      sync.Mutex
	next    uint64 // last tag handed out
	base    uint64 // tag of entries[0]
	entries []confirmEntry
	head    int
	acked   uint64 // messages confirmed (basic.ack) so far
}

type confirmEntry struct {
	remaining int32
	nack      bool
}

func (t *confirmTracker) add(queues int) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	if t.head == len(t.entries) {
		t.entries = t.entries[:0]
		t.head = 0
		t.base = t.next
	}
	t.entries = append(t.entries, confirmEntry{remaining: int32(queues)})
	return t.next
}

// confirmed is how many messages the tracker has confirmed.
func (t *confirmTracker) confirmed() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.acked
}

func (t *confirmTracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries) - t.head
}

// Confirm implements queue.Confirmer.
func (t *confirmTracker) Confirm(tags []uint64, ok bool) { t.confirm(tags, ok, true) }

// ConfirmDeferred implements queue.DeferredConfirmer: the frames wait in
// the output buffer for Flush (or the reader's next flush).
func (t *confirmTracker) ConfirmDeferred(tags []uint64, ok bool) { t.confirm(tags, ok, false) }

// Flush implements queue.DeferredConfirmer: it writes what is buffered, as
// the reader does before it blocks.
func (t *confirmTracker) Flush() { t.ch.c.flush() }

// confirm settles tags; the reader's own confirms and deferred ones (wake
// false) wait in the output buffer for the next conn.flush.
func (t *confirmTracker) confirm(tags []uint64, ok, wake bool) {
	t.mu.Lock()
	for _, tag := range tags {
		i := int(tag-t.base) + 0
		if tag < t.base || i >= len(t.entries) || i < t.head {
			continue
		}
		e := &t.entries[i]
		if e.remaining <= 0 {
			continue
		}
		if !ok {
			e.nack = true
		}
		e.remaining--
	}
	// Send what is settled at the front.
	var frames []wire.Method
	var ackUpTo, acked uint64
	for t.head < len(t.entries) && t.entries[t.head].remaining <= 0 {
		tag := t.base + uint64(t.head)
		if t.entries[t.head].nack {
			if ackUpTo != 0 {
				frames = append(frames, &wire.BasicAck{DeliveryTag: ackUpTo, Multiple: true})
				ackUpTo = 0
			}
			frames = append(frames, &wire.BasicNack{DeliveryTag: tag})
		} else {
			ackUpTo = tag
			acked++
		}
		t.head++
	}
	if ackUpTo != 0 {
		frames = append(frames, &wire.BasicAck{DeliveryTag: ackUpTo, Multiple: true})
	}
	if t.head > 4096 && t.head*2 > len(t.entries) {
		n := copy(t.entries, t.entries[t.head:])
		t.entries = t.entries[:n]
		t.base += uint64(t.head)
		t.head = 0
	}
	if len(frames) > 0 {
		if acked > 0 {
			t.ch.c.srv.Counters.Confirmed.Add(acked)
			t.acked += acked
		}
		id := t.ch.id
		appendFrames := func(b []byte) []byte {
			for _, f := range frames {
				b = wire.AppendMethodFrame(b, id, f)
			}
			return b
		}
		if wake {
			t.ch.c.send(appendFrames)
		} else {
			t.ch.c.sendQuiet(appendFrames)
		}
	}
	t.mu.Unlock()
}

// txState buffers a transaction's publishes and acks until tx.commit.
type txState struct {
	publishes []txPublish
	acks      []txAck
}

type txPublish struct {
	msg       *message.Message
	mandatory bool
	headers   map[string]any
}

type txAck struct {
	tag      uint64
	multiple bool
	reject   bool
	requeue  bool
}

// txWaiter counts a transaction's outstanding queue confirms.
type txWaiter struct {
	mu      sync.Mutex
	waiting int
	done    chan struct{}
}

func (w *txWaiter) Confirm(tags []uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting -= len(tags)
	if w.waiting == 0 && w.done != nil {
		close(w.done)
		w.done = nil
	}
}

func (ch *channel) txCommit(ctx context.Context) error {
	if !ch.txMode {
		return newError(wire.PreconditionFailed, "channel is not transactional")
	}
	ch.c.flush()
	tx := ch.tx
	ch.tx = txState{}
	w := &txWaiter{done: make(chan struct{})}
	done := w.done
	var buf [4]queue.Queue
	w.mu.Lock()
	for _, p := range tx.publishes {
		if isReplyName(p.msg.Exchange, p.msg.RoutingKey) {
			if !ch.sendReply(p.msg) && p.mandatory {
				ch.sendReturn(p.msg, wire.NoRoute, "NO_ROUTE")
			}
			continue
		}
		qs, err := ch.c.vh.Route(ctx, p.msg.Exchange, p.msg.RoutingKey, p.headers, buf[:0])
		if err != nil {
			w.mu.Unlock()
			return fromErr(err)
		}
		if len(qs) == 0 {
			if p.mandatory {
				ch.sendReturn(p.msg, wire.NoRoute, "NO_ROUTE")
			}
			continue
		}
		w.waiting += len(qs)
		for _, q := range qs {
			q.Publish([]queue.Publish{{Msg: p.msg, Confirm: w}})
		}
	}
	if w.waiting == 0 {
		close(w.done)
		w.done = nil
	}
	w.mu.Unlock()
	for _, a := range tx.acks {
		var err error
		if a.reject {
			err = ch.settle(a.tag, a.multiple, settleReject, a.requeue)
		} else {
			err = ch.settle(a.tag, a.multiple, settleAck, false)
		}
		if err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	ch.c.sendMethod(ch.id, &wire.TxCommitOk{})
	return nil
}
