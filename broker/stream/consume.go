package stream

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/store/streamlog"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// maxCredit bounds a subscription's accumulated credit.
const maxCredit = 1 << 20

// subscription is one Subscribe of a connection. A delivery goroutine
// reads chunks from the log and queues them on the connection's output,
// one credit per chunk; it waits while the subscription has no credit or
// the output is full. A single-active-consumer subscription runs it only
// while active, from the offset its client answered in consumer update.
type subscription struct {
	c           *conn
	id          uint8
	st          *streamState
	name        string
	sac         bool
	superStream string
	partition   int // index of the stream in its super stream
	filter      *streamlog.Filter

	credit   atomic.Int64
	creditCh chan struct{}

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	active  bool // SAC: the group chose this one
	stopped bool
}

func (c *conn) subscribe(m *proto.Subscribe) {
	code := c.subscribeCode(m)
	c.respond(proto.KeySubscribe, m.CorrelationID, code)
	if code != codeOK {
		return
	}
	c.mu.Lock()
	s := c.subs[m.SubscriptionID]
	c.mu.Unlock()
	if s.sac {
		s.st.join(s)
		return
	}
	s.start(m.Offset)
}

func (c *conn) subscribeCode(m *proto.Subscribe) uint16 {
	if m.Offset.Type == proto.OffsetNone {
		return proto.CodePreconditionFailed
	}
	if !c.perm.Check(meta.Read, m.Stream) {
		return proto.CodeAccessRefused
	}
	st, code := c.stream(m.Stream)
	if code != codeOK {
		return code
	}
	s := &subscription{c: c, id: m.SubscriptionID, st: st, creditCh: make(chan struct{}, 1), partition: -1}
	s.credit.Store(int64(m.Credit))
	s.name = m.Properties["name"]
	s.sac = m.Properties["single-active-consumer"] == "true"
	s.superStream = m.Properties["super-stream"]
	if s.sac && s.name == "" {
		return proto.CodePreconditionFailed
	}
	if s.superStream != "" {
		s.partition = c.partitionIndex(s.superStream, m.Stream)
	}
	s.filter = subscriptionFilter(m.Properties)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.subs[m.SubscriptionID]; ok {
		return proto.CodeSubscriptionIDAlreadyExists
	}
	if !st.use(c) {
		return proto.CodeStreamDoesNotExist
	}
	c.subs[m.SubscriptionID] = s
	return codeOK
}

// subscriptionFilter reads the filter.N and match-unfiltered properties:
// the reader then skips chunks whose bloom filter holds none of the values
// (by chunk, as RabbitMQ: the client filters messages itself).
func subscriptionFilter(props map[string]string) *streamlog.Filter {
	var f streamlog.Filter
	for k, v := range props {
		if strings.HasPrefix(k, "filter.") {
			f.Values = append(f.Values, v)
		}
	}
	if len(f.Values) == 0 {
		return nil
	}
	sort.Strings(f.Values)
	f.MatchUnfiltered = props["match-unfiltered"] == "true"
	return &f
}

func toLogSpec(o proto.OffsetSpec) streamlog.OffsetSpec {
	switch o.Type {
	case proto.OffsetFirst:
		return streamlog.OffsetSpec{Kind: streamlog.OffsetFirst}
	case proto.OffsetLast:
		return streamlog.OffsetSpec{Kind: streamlog.OffsetLast}
	case proto.OffsetOffset:
		return streamlog.OffsetSpec{Kind: streamlog.OffsetAbsolute, Offset: uint64(max(o.Value, 0))}
	case proto.OffsetTimestamp:
		return streamlog.OffsetSpec{Kind: streamlog.OffsetTimestamp, Timestamp: o.Value}
	}
	return streamlog.OffsetSpec{Kind: streamlog.OffsetNext}
}

// start runs the delivery goroutine from spec (stopping a previous one).
func (s *subscription) start(spec proto.OffsetSpec) {
	s.pause()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || (s.sac && !s.active) {
		// Stopped, or deactivated while its client was answering.
		return
	}
	ra := s.c.srv.reg.readAhead(s.c.vh)
	inflight := &sectionsInFlight{}
	r, err := s.st.log.NewReader(toLogSpec(spec), streamlog.ReaderOptions{
		ReadAhead: ra, FileSections: true, SectionMin: sendfileMin, Filter: s.filter, BeforeClose: inflight.waitAll,
	})
	if err != nil {
		s.c.srv.log.Warn("stream: open reader", "stream", s.st.name, "err", err)
		return
	}
	ctx, cancel := context.WithCancel(s.c.ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	go s.deliverLoop(ctx, r, inflight, s.done)
}

// pause stops the delivery goroutine and waits for it.
func (s *subscription) pause() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// stop ends the subscription for good (unsubscribe, connection closed,
// stream deleted).
func (s *subscription) stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	s.pause()
	if s.sac {
		s.st.leave(s)
	}
}

func (s *subscription) addCredit(n int) {
	if s.credit.Add(int64(n)) > maxCredit {
		s.credit.Store(maxCredit)
	}
	select {
	case s.creditCh <- struct{}{}:
	default:
	}
}

// stageMax bounds the deliver frames a subscription gathers before
// handing them to the connection's output in one go.
const stageMax = 256 << 10

// deliverLoop sends chunks while the subscription has credit. After a
// blocking read it takes every chunk already available (TryNext, from the
// read-ahead buffer when chunks are small) into one staging buffer and
// hands the lot to the output at once, so small chunks cost a copy each
// and no lock, wake-up or syscall of their own.
func (s *subscription) deliverLoop(ctx context.Context, r *streamlog.Reader, inflight *sectionsInFlight, done chan struct{}) {
	defer close(done)
	defer r.Close()
	c := s.c
	var stage []byte
	for {
		for s.credit.Load() <= 0 {
			select {
			case <-s.creditCh:
			case <-ctx.Done():
				return
			}
		}
		ch, err := r.Next(ctx)
		if err != nil {
			s.readFailed(ctx, err)
			return
		}
		if !c.out.waitRoom(ctx) {
			return
		}
		ver := uint16(1)
		var committed uint64
		if c.deliverV2.Load() {
			ver = 2
			if id, _ := s.st.log.Committed(); id >= 0 {
				committed = uint64(id)
			}
		}
		stage = stage[:0]
		var chunks, records uint64
		for ch != nil {
			if ch.InMemory() {
				stage = s.appendInMemory(stage, ch, ver, committed)
			} else {
				// A large chunk: what is staged, then the header through the
				// buffer and the data by sendfile, while this goroutine
				// goes on to the next chunk (the reader keeps the file
				// open until the sections in flight are sent).
				if len(stage) > 0 {
					var ok bool
					if stage, ok = c.out.appendStaged(stage); !ok {
						return
					}
				}
				f, off, n := ch.DataSection()
				hdr := ch.HeaderBytes()
				sent := c.out.appendSection(func(b []byte) []byte {
					b = proto.AppendDeliverHeader(b, ver, s.id, committed, len(hdr)+int(n))
					return append(b, hdr...)
				}, f, off, n)
				if sent == nil || !inflight.add(sent) {
					return
				}
			}
			chunks++
			records += uint64(ch.Header.NumRecords)
			if s.credit.Add(-1) <= 0 || len(stage) >= stageMax {
				break
			}
			if ch, err = r.TryNext(); err != nil {
				break
			}
		}
		if len(stage) > 0 {
			var ok bool
			if stage, ok = c.out.appendStaged(stage); !ok {
				return
			}
		}
		c.srv.Counters.ChunksDelivered.Add(chunks)
		c.srv.Counters.Delivered.Add(records)
		if err != nil {
			s.readFailed(ctx, err)
			return
		}
	}
}

func (s *subscription) readFailed(ctx context.Context, err error) {
	if ctx.Err() == nil && !errors.Is(err, streamlog.ErrClosed) {
		s.c.srv.log.Warn("stream: read chunk", "stream", s.st.name, "err", err)
	}
}

// sendfileMin is the chunk size from which a chunk not read ahead goes to
// the socket with sendfile; the reader reads smaller ones into memory.
// Measured on loopback (docs/benchmarks.md), a pread and a copy into the
// batch beat sendfile by 35-45% in msg/s (and broker CPU) at 64 KiB and by
// 10-15% near 1 MiB; sendfile's gain, a copy saved, is on real NICs.
const sendfileMin = 512 << 10

func (s *subscription) appendInMemory(b []byte, ch *streamlog.Chunk, ver uint16, committed uint64) []byte {
	if wire := ch.Wire(); wire != nil {
		b = proto.AppendDeliverHeader(b, ver, s.id, committed, len(wire))
		return append(b, wire...)
	}
	hdr, data := ch.HeaderBytes(), ch.Data()
	b = proto.AppendDeliverHeader(b, ver, s.id, committed, len(hdr)+len(data))
	return append(append(b, hdr...), data...)
}

func (c *conn) credit(m *proto.Credit) {
	c.mu.Lock()
	s := c.subs[m.SubscriptionID]
	c.mu.Unlock()
	if s == nil {
		c.srv.Counters.countError(proto.CodeSubscriptionIDDoesNotExist)
		c.out.send(&proto.CreditResponse{Code: proto.CodeSubscriptionIDDoesNotExist, SubscriptionID: m.SubscriptionID})
		return
	}
	s.addCredit(int(m.Credit))
}

func (c *conn) unsubscribe(id uint8) uint16 {
	c.mu.Lock()
	s, ok := c.subs[id]
	delete(c.subs, id)
	c.mu.Unlock()
	if !ok {
		return proto.CodeSubscriptionIDDoesNotExist
	}
	s.stop()
	s.st.release(c)
	return codeOK
}

func (c *conn) storeOffset(m *proto.StoreOffset) {
	if m.Reference == "" || len(m.Reference) > 255 || !c.perm.Check(meta.Read, m.Stream) {
		return
	}
	st, code := c.stream(m.Stream)
	if code != codeOK {
		return
	}
	if err := st.log.StoreOffset(m.Reference, m.Offset, nil); err != nil {
		c.srv.log.Warn("stream: store offset", "stream", m.Stream, "err", err)
	}
}

func (c *conn) queryOffset(m *proto.QueryOffset) {
	resp := &proto.QueryOffsetResponse{CorrelationID: m.CorrelationID, Code: codeOK}
	st, code := c.stream(m.Stream)
	switch {
	case code != codeOK:
		resp.Code = code
	case !c.perm.Check(meta.Read, m.Stream):
		resp.Code = proto.CodeAccessRefused
	default:
		off, ok := st.log.QueryOffset(m.Reference)
		if !ok {
			resp.Code = proto.CodeNoOffset
		}
		resp.Offset = off
	}
	c.srv.Counters.countError(resp.Code)
	c.out.send(resp)
}

// streamGone drops the connection's publishers and subscriptions of a
// deleted stream and tells the client.
func (c *conn) streamGone(st *streamState) {
	c.mu.Lock()
	var subs []*subscription
	for id, s := range c.subs {
		if s.st == st {
			subs = append(subs, s)
			delete(c.subs, id)
		}
	}
	for id, p := range c.publishers {
		if p.st == st {
			delete(c.publishers, id)
		}
	}
	c.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}
	c.srv.Counters.countError(proto.CodeStreamNotAvailable)
	c.out.send(&proto.MetadataUpdate{Code: proto.CodeStreamNotAvailable, Stream: st.name})
}
