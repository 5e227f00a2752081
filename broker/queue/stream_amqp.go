package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/amqp10"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/store/streamlog"
)

// streamAMQP is a stream's AMQP 0.9.1 side: its consumers and the
// scratch state of publishing.
type streamAMQP struct {
	mu        sync.Mutex
	consumers map[Consumer]*streamConsumer
	batches   sync.Pool // *streamPublish
}

// streamPublish is the reusable state of one Publish call.
type streamPublish struct {
	batch   *streamlog.Batch
	scratch []byte
}

// streamConfirm is what one chunk confirms once durable.
type streamConfirm struct {
	c    Confirmer
	tags []uint64
}

// Publish implements Queue: the batch becomes one chunk (more if it
// exceeds a chunk's limits) of AMQP 1.0 encoded messages, and its
// confirms go out once the chunk is durable. It never waits for the disk.
func (s *Stream) Publish(batch []Publish) {
	sp, _ := s.amqp.batches.Get().(*streamPublish)
	if sp == nil {
		sp = &streamPublish{batch: streamlog.NewBatch()}
	}
	defer s.amqp.batches.Put(sp)
	b := sp.batch
	b.Reset()
	var confirms []streamConfirm
	flush := func() {
		if b.Entries() == 0 {
			return
		}
		cs := confirms
		confirms = nil
		_, err := s.log.Append(b, func(_ uint64, err error) {
			for _, c := range cs {
				c.c.Confirm(c.tags, err == nil)
			}
		})
		if err != nil {
			for _, c := range cs {
				c.c.Confirm(c.tags, false)
			}
		}
		b.Reset()
	}
	addConfirm := func(p Publish) {
		if p.Confirm == nil {
			return
		}
		for i := range confirms {
			if confirms[i].c == p.Confirm {
				confirms[i].tags = append(confirms[i].tags, p.Tag)
				return
			}
		}
		confirms = append(confirms, streamConfirm{c: p.Confirm, tags: []uint64{p.Tag}})
	}
	for _, p := range batch {
		props, err := wire.DecodeProperties(p.Msg.Props)
		if err != nil {
			if p.Confirm != nil {
				p.Confirm.Confirm([]uint64{p.Tag}, false)
			}
			continue
		}
		sp.scratch = amqp10.AppendFromAMQP091(sp.scratch[:0], &props, p.Msg.Exchange, p.Msg.RoutingKey, p.Msg.Body)
		// x-stream-filter-value (RabbitMQ's header) sets the message's
		// filter value: the chunk gets a bloom filter for consumers
		// with x-stream-filter.
		fv, filtered := props.Headers["x-stream-filter-value"].(string)
		add := func() error {
			if filtered {
				return b.AddFiltered(sp.scratch, fv)
			}
			return b.AddSimple(sp.scratch)
		}
		if err := add(); errors.Is(err, streamlog.ErrBatchFull) {
			flush()
			err = add()
			if err != nil {
				if p.Confirm != nil {
					p.Confirm.Confirm([]uint64{p.Tag}, false)
				}
				continue
			}
		}
		addConfirm(p)
	}
	flush()
}

// Throttle implements Queue: appends never queue up in memory.
func (s *Stream) Throttle(ctx context.Context) error { return nil }

// Ack implements Queue: a stream keeps messages whatever consumers do;
// acks only return credit, which the consumer side counts.
func (s *Stream) Ack(seqs []uint64) {}

// Requeue implements Queue: nothing to put back in a log.
func (s *Stream) Requeue(seqs []uint64) {}

// Reject implements Queue: nothing to discard from a log.
func (s *Stream) Reject(seqs []uint64) {}

// Get implements Queue: streams do not support basic.get, as RabbitMQ.
func (s *Stream) Get(ctx context.Context, noAck bool) (Delivery, bool, error) {
	return Delivery{}, false, fmt.Errorf("%w: basic.get not supported by stream queues queue '%s' in vhost '%s'", ErrNotImplemented, s.info.Name, s.info.Vhost)
}

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
}

// Consume implements Queue. As RabbitMQ, a stream consumer needs manual
// acks and a prefetch limit; x-stream-offset says where it starts
// (first, last, next (the default), an offset, a timestamp, or an
// interval back from now such as "30m" or "7D").
func (s *Stream) Consume(ctx context.Context, c Consumer, opts ConsumeOptions) error {
	rs := fmt.Sprintf("queue '%s' in vhost '%s'", s.info.Name, s.info.Vhost)
	if c.NoAck() {
		return fmt.Errorf("%w: automatic acknowledgement not supported by stream queues %s", ErrNotImplemented, rs)
	}
	if opts.Prefetch <= 0 {
		return fmt.Errorf("%w: consumer prefetch count is not set for stream %s", ErrInvalidArgument, rs)
	}
	spec, start, err := parseStreamOffset(opts.Args["x-stream-offset"], time.Now())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	filter, err := parseStreamFilter(opts.Args)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	r, err := s.log.NewReader(spec, streamlog.ReaderOptions{ReadAhead: s.ra, Filter: filter})
	if err != nil {
		return fmt.Errorf("stream %s: %w", rs, err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	sc := &streamConsumer{s: s, c: c, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{}), start: start, r: r}
	s.mu.Lock()
	gone := s.gone
	s.mu.Unlock()
	if gone {
		cancel()
		r.Close()
		return ErrDeleted
	}
	s.amqp.mu.Lock()
	if s.amqp.consumers == nil {
		s.amqp.consumers = make(map[Consumer]*streamConsumer)
	}
	s.amqp.consumers[c] = sc
	s.amqp.mu.Unlock()
	go sc.run(cctx)
	return nil
}

// parseStreamOffset reads x-stream-offset. start is the first offset to
// deliver (a chunk may begin before it).
func parseStreamOffset(v any, now time.Time) (streamlog.OffsetSpec, uint64, error) {
	switch v := v.(type) {
	case nil:
		return streamlog.OffsetSpec{Kind: streamlog.OffsetNext}, 0, nil
	case string:
		switch v {
		case "first":
			return streamlog.OffsetSpec{Kind: streamlog.OffsetFirst}, 0, nil
		case "last":
			return streamlog.OffsetSpec{Kind: streamlog.OffsetLast}, 0, nil
		case "next":
			return streamlog.OffsetSpec{Kind: streamlog.OffsetNext}, 0, nil
		}
		d, err := parseAge(v)
		if err != nil {
			return streamlog.OffsetSpec{}, 0, fmt.Errorf("invalid x-stream-offset '%s'", v)
		}
		return streamlog.OffsetSpec{Kind: streamlog.OffsetTimestamp, Timestamp: now.Add(-d).UnixMilli()}, 0, nil
	case time.Time:
		return streamlog.OffsetSpec{Kind: streamlog.OffsetTimestamp, Timestamp: v.UnixMilli()}, 0, nil
	}
	if n, ok := toInt64(v); ok {
		if n < 0 {
			return streamlog.OffsetSpec{}, 0, fmt.Errorf("invalid x-stream-offset %d", n)
		}
		return streamlog.OffsetSpec{Kind: streamlog.OffsetAbsolute, Offset: uint64(n)}, uint64(n), nil
	}
	return streamlog.OffsetSpec{}, 0, fmt.Errorf("invalid x-stream-offset %v", v)
}

// parseStreamFilter reads x-stream-filter (a string or an array of
// strings) and x-stream-match-unfiltered (a boolean). As with RabbitMQ,
// filtering is by chunk: the consumer may still get messages with other
// filter values and should check x-stream-filter-value itself.
func parseStreamFilter(args map[string]any) (*streamlog.Filter, error) {
	v, ok := args["x-stream-filter"]
	if !ok {
		return nil, nil
	}
	f := &streamlog.Filter{}
	switch v := v.(type) {
	case string:
		f.Values = []string{v}
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("invalid x-stream-filter value %v", x)
			}
			f.Values = append(f.Values, s)
		}
	default:
		return nil, fmt.Errorf("invalid x-stream-filter %v", v)
	}
	if u, ok := args["x-stream-match-unfiltered"]; ok {
		b, ok := u.(bool)
		if !ok {
			return nil, fmt.Errorf("invalid x-stream-match-unfiltered %v", u)
		}
		f.MatchUnfiltered = b
	}
	return f, nil
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
	for {
		if sc.pending {
			// The consumer copies the message into its connection's output
			// during Deliver: msg, its properties and body are reused.
			if !sc.c.Deliver(Delivery{Msg: &sc.msg, Queue: sc.s, Seq: sc.off}) {
				return false, nil
			}
			sc.pending = false
		}
		if sc.chunk != nil {
			off, data, ok := sc.it.Next()
			if !ok {
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
			sc.off, sc.pending = off, true
			continue
		}
		ch, err := sc.r.TryNext()
		if err != nil {
			return false, err
		}
		if ch == nil {
			return true, nil
		}
		sc.setChunk(ch)
	}
}

func (sc *streamConsumer) setChunk(ch *streamlog.Chunk) {
	sc.chunk = ch
	sc.it = ch.Entries()
	sc.ts = time.UnixMilli(ch.Header.Timestamp).UnixNano()
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

// streamConverter turns stored AMQP 1.0 messages into AMQP 0.9.1 ones for
// one consumer. Messages from one publisher usually differ only in their
// body: when the bytes before the body are those of the previous message,
// the previous properties are reused with the new x-stream-offset patched
// in, and nothing is decoded.
type streamConverter struct {
	m      amqp10.Message
	reuse  bool   // prefix holds the previous message's bytes before its body
	prefix []byte // (none for a message that is only a data section)
	props  []byte
	offPos int // where x-stream-offset's value is in props
}

func (c *streamConverter) convert(msg *message.Message, data []byte, off uint64) {
	if c.reuse && len(data) > len(c.prefix) && bytes.Equal(data[:len(c.prefix)], c.prefix) {
		if body, ok := amqp10.DataBody(data[len(c.prefix):]); ok {
			binary.BigEndian.PutUint64(c.props[c.offPos:], off)
			*msg = message.Message{Exchange: c.m.Exchange, RoutingKey: c.m.RoutingKey, Props: c.props, Body: body}
			return
		}
	}
	if err := amqp10.DecodeInto(&c.m, data); err != nil {
		// Not an AMQP 1.0 message (a stream client may publish anything):
		// deliver the bytes as they are.
		c.m = amqp10.Message{Body: data, BodyAt: -1}
	}
	c.props, c.offPos = appendPropsWithOffset(c.props[:0], &c.m.Props, off)
	c.reuse = c.m.BodyAt >= 0
	c.prefix = c.prefix[:0]
	if c.reuse {
		c.prefix = append(c.prefix, data[:c.m.BodyAt]...)
	}
	*msg = message.Message{Exchange: c.m.Exchange, RoutingKey: c.m.RoutingKey, Props: c.props, Body: c.m.Body}
}

const streamOffsetHeader = "x-stream-offset"

// appendPropsWithOffset encodes p with the header x-stream-offset (a long,
// as RabbitMQ adds it) last in the headers table, and returns where its
// value is.
func appendPropsWithOffset(b []byte, p *wire.Properties, off uint64) ([]byte, int) {
	hdrs := p.Headers
	p.Headers = nil
	raw := p.Append(nil)
	p.Headers = hdrs
	flags := uint16(raw[0])<<8 | uint16(raw[1]) | wire.FlagHeaders
	// Headers come after content-type and content-encoding.
	pos := 2
	if flags&wire.FlagContentType != 0 {
		pos += 1 + int(raw[pos])
	}
	if flags&wire.FlagContentEncoding != 0 {
		pos += 1 + int(raw[pos])
	}
	b = append(b, byte(flags>>8), byte(flags))
	b = append(b, raw[2:pos]...)
	tstart := len(b)
	b = append(b, 0, 0, 0, 0)
	if len(hdrs) > 0 {
		delete(hdrs, streamOffsetHeader)
		t := wire.AppendTable(nil, hdrs)
		b = append(b, t[4:]...)
	}
	b = append(b, byte(len(streamOffsetHeader)))
	b = append(b, streamOffsetHeader...)
	b = append(b, 'l')
	offPos := len(b)
	b = binary.BigEndian.AppendUint64(b, off)
	binary.BigEndian.PutUint32(b[tstart:], uint32(len(b)-tstart-4))
	b = append(b, raw[pos:]...)
	return b, offPos
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
