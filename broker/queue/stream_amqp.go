package queue

import (
	"context"
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
	sc.bc, _ = c.(BatchConsumer)
	sc.next = sc.nextDelivery
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
	if n, ok := message.FieldInt(v); ok {
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
