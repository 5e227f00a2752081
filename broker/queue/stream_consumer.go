package queue

import (
	"context"
	"sync"
	"time"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/store/streamlog"
)

// streamConsumer is one AMQP consumer reading the log. Its goroutine
// delivers and waits (for credit, for new chunks); Wake delivers on the
// caller's goroutine when the consumer's goroutine is idle, so credit
// coming back with an ack goes out again without a goroutine hand-off.
//
// mu is held by whoever reads the log and delivers; the fields below it are
// touched only under it. The consumer's goroutine holds it while it waits
// for new chunks (Wake then only signals); it releases it before waiting
// for credit.
type streamConsumer struct {
	s      *Stream
	c      Consumer
	bc     BatchConsumer // c, if it takes runs of deliveries; else nil
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}
	start  uint64 // records before this offset are skipped (offset specs land on chunk starts)

	mu      sync.Mutex
	r       *streamlog.Reader
	closed  bool // r is closed: the goroutine ended
	chunk   *streamlog.Chunk
	it      streamlog.Entries // the rest of chunk
	ts      int64             // chunk's timestamp (ns)
	conv    streamConverter
	msg     message.Message
	pending bool // msg is converted but was refused by Deliver
	off     uint64
	d       Delivery // what bc.DeliverEach gets from next
	next    func() *Delivery
	stop    struct {
		atTail bool
		err    error
	} // why next returned nil
}

// run delivers the log's messages to the consumer, waiting for credit
// (Wake) when it has none and for new chunks at the tail.
func (sc *streamConsumer) run(ctx context.Context) {
	defer close(sc.done)
	for {
		sc.mu.Lock()
		atTail, err := sc.deliverReady()
		if err == nil && atTail {
			// Everything durable went out in one batch: the socket write
			// waited until the reader would block (or the credit ran out).
			sc.c.Flush()
			var ch *streamlog.Chunk
			if ch, err = sc.r.Next(ctx); err == nil {
				sc.setChunk(ch)
				sc.mu.Unlock()
				continue
			}
		}
		if err != nil {
			sc.closeLocked()
			sc.mu.Unlock()
			sc.c.Flush()
			return
		}
		sc.mu.Unlock()
		sc.c.Flush()
		select {
		case <-sc.wake:
		case <-ctx.Done():
			sc.mu.Lock()
			sc.closeLocked()
			sc.mu.Unlock()
			return
		}
	}
}

// closeLocked closes the reader; Wake delivers nothing after it. sc.mu is held.
func (sc *streamConsumer) closeLocked() {
	if !sc.closed {
		sc.closed = true
		sc.r.Close()
	}
}

// deliverReady delivers what can go without waiting: chunks already
// durable (from the read-ahead buffer when they are small), until the
// consumer refuses a message (no credit, output full) or the reader would
// block (atTail). sc.mu is held.
func (sc *streamConsumer) deliverReady() (atTail bool, err error) {
	if sc.pending {
		// The consumer copies the message into its connection's output
		// during Deliver: msg, its properties and body are reused.
		if !sc.c.Deliver(Delivery{Msg: &sc.msg, Queue: sc.s, Seq: sc.off}) {
			return false, nil
		}
		sc.pending = false
	}
	if sc.bc != nil {
		sc.stop.atTail, sc.stop.err = false, nil
		if sc.bc.DeliverEach(sc.next) {
			return false, nil
		}
		return sc.stop.atTail, sc.stop.err
	}
	for {
		ok, atTail, err := sc.advance()
		if !ok {
			return atTail, err
		}
		if !sc.c.Deliver(Delivery{Msg: &sc.msg, Queue: sc.s, Seq: sc.off}) {
			sc.pending = true
			return false, nil
		}
	}
}

// nextDelivery is sc.next, for DeliverEach: the next message, or nil
// with the reason in sc.stop. sc.mu is held (by deliverReady).
func (sc *streamConsumer) nextDelivery() *Delivery {
	ok, atTail, err := sc.advance()
	if !ok {
		sc.stop.atTail, sc.stop.err = atTail, err
		return nil
	}
	sc.d = Delivery{Msg: &sc.msg, Queue: sc.s, Seq: sc.off}
	return &sc.d
}

// advance converts the next message of the log into sc.msg (offset
// sc.off). ok is false when no durable message is left to read without
// waiting (atTail) or on err. sc.mu is held.
func (sc *streamConsumer) advance() (ok, atTail bool, err error) {
	for {
		if sc.chunk != nil {
			off, data, more := sc.it.Next()
			if !more {
				sc.chunk = nil
				continue
			}
			if off < sc.start {
				continue
			}
			sc.conv.convert(&sc.msg, data, off)
			sc.msg.Persistent = true
			sc.msg.Timestamp = sc.ts
			if sc.msg.Exchange == "" && sc.msg.RoutingKey == "" {
				sc.msg.RoutingKey = sc.s.info.Name
			}
			sc.off = off
			return true, false, nil
		}
		ch, err := sc.r.TryNext()
		if err != nil {
			return false, false, err
		}
		if ch == nil {
			return false, true, nil
		}
		sc.setChunk(ch)
	}
}

func (sc *streamConsumer) setChunk(ch *streamlog.Chunk) {
	sc.chunk = ch
	sc.it = ch.Entries()
	sc.ts = ch.Header.Timestamp * int64(time.Millisecond) // ms to ns
}

// deliverNow is Wake for one consumer: if its goroutine is idle, the
// caller delivers what is ready itself (an ack's credit goes out again
// from the goroutine that read the ack, before it reads on); otherwise,
// or when the log must be waited for, the goroutine is signalled.
func (sc *streamConsumer) deliverNow() {
	if !sc.mu.TryLock() {
		sc.signal()
		return
	}
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	atTail, err := sc.deliverReady()
	sc.mu.Unlock()
	sc.c.Flush()
	if atTail || err != nil {
		sc.signal()
	}
}

// Cancel implements Queue: the consumer's goroutine stops.
func (s *Stream) Cancel(c Consumer) {
	s.amqp.mu.Lock()
	sc := s.amqp.consumers[c]
	delete(s.amqp.consumers, c)
	s.amqp.mu.Unlock()
	if sc != nil {
		sc.cancel()
	}
}

// Wake implements Queue. Each consumer reads the log on its own, so
// credit coming back to one wakes no other; c's deliveries may be made on
// the calling goroutine (see deliverNow). nil signals every consumer's
// goroutine.
func (s *Stream) Wake(c Consumer) {
	s.amqp.mu.Lock()
	if c == nil {
		for _, sc := range s.amqp.consumers {
			sc.signal()
		}
		s.amqp.mu.Unlock()
		return
	}
	sc := s.amqp.consumers[c]
	s.amqp.mu.Unlock()
	if sc != nil {
		sc.deliverNow()
	}
}

// signal wakes the consumer's goroutine if it waits (or lets its next wait
// return at once).
func (sc *streamConsumer) signal() {
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

func (s *Stream) consumerCount() int {
	s.amqp.mu.Lock()
	defer s.amqp.mu.Unlock()
	return len(s.amqp.consumers)
}

// stopConsumers stops every consumer goroutine and waits for them;
// cancelled tells the consumers (the stream was deleted).
func (s *Stream) stopConsumers(cancelled bool) {
	s.amqp.mu.Lock()
	scs := s.amqp.consumers
	s.amqp.consumers = nil
	s.amqp.mu.Unlock()
	for _, sc := range scs {
		sc.cancel()
	}
	for _, sc := range scs {
		<-sc.done
		if cancelled {
			sc.c.Cancelled()
		}
	}
}
