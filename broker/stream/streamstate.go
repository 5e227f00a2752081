package stream

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/store/streamlog"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// streamState is what connections share about one stream: the batch being
// filled by publishers (one chunk per flush, whoever flushes takes what
// every publisher added), de-duplication sequences, single-active-consumer
// groups and the connections to tell when the stream goes away.
//
// Lock order: streamState.mu, then conn.mu, then output.mu; the log's
// mutex is a leaf.
type streamState struct {
	srv   *Server
	vhost string
	name  string
	q     *queue.Stream
	log   *streamlog.Log

	mu        sync.Mutex
	batch     *streamlog.Batch
	pend      []confirmRec
	seqs      map[string]int64 // publisher reference -> highest accepted publishing id (-1: none)
	batchSeqs map[string]uint64
	users     map[*conn]int
	groups    map[string]*sacGroup
	dead      bool
}

// A publishing connection flushes its streams when its socket runs dry,
// or as soon as a stream's batch reaches these bounds, so that a publisher
// that never lets the socket run dry still gets chunks (and confirms) of a
// useful size.
const (
	flushEntries = 4096
	flushBytes   = 1 << 20
)

// full reports whether the batch should be flushed now.
func (st *streamState) fullLocked() bool {
	return st.batch.Entries() >= flushEntries || st.batch.DataLen() >= flushBytes
}

// confirmRec is the publishing ids of one publisher in one chunk.
type confirmRec struct {
	c   *conn
	pub uint8
	ids []uint64
}

func newStreamState(s *Server, vhost, name string, q *queue.Stream) *streamState {
	return &streamState{
		srv: s, vhost: vhost, name: name, q: q, log: q.Log(),
		batch:     streamlog.NewBatch(),
		seqs:      map[string]int64{},
		batchSeqs: map[string]uint64{},
		users:     map[*conn]int{},
		groups:    map[string]*sacGroup{},
	}
}

// use and release count a connection's publishers and subscriptions.
func (st *streamState) use(c *conn) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dead {
		return false
	}
	st.users[c]++
	return true
}

func (st *streamState) release(c *conn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.users[c]--; st.users[c] <= 0 {
		delete(st.users, c)
	}
}

// gone runs once the stream is deleted: pending publishes fail, users
// drop their publishers and subscriptions and get a metadata update.
func (st *streamState) gone() {
	st.mu.Lock()
	st.dead = true
	pend := st.pend
	st.pend = nil
	st.batch.Reset()
	users := make([]*conn, 0, len(st.users))
	for c := range st.users {
		users = append(users, c)
	}
	st.users = map[*conn]int{}
	st.mu.Unlock()
	st.srv.confirm(pend, streamlog.ErrClosed)
	for _, c := range users {
		c.streamGone(st)
	}
}

// sequence returns the highest publishing id accepted for ref (-1: none).
func (st *streamState) sequenceLocked(ref string) int64 {
	if v, ok := st.seqs[ref]; ok {
		return v
	}
	v := int64(-1)
	if s, ok := st.log.PublisherSequence(ref); ok {
		v = int64(s)
	}
	st.seqs[ref] = v
	return v
}

func (st *streamState) sequence(ref string) int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sequenceLocked(ref)
}

// add puts a publish frame's messages into the batch. Duplicates (a
// publishing id at or below the publisher reference's last one) are not
// stored: while the batch holds messages they are confirmed with it (the
// original was appended before, so it is durable by then); otherwise
// they are returned, to be confirmed at once (the original's chunk is
// already written, and normally already durable).
func (st *streamState) add(c *conn, p *publisher, msgs []proto.PublishedMessage, dups []uint64) ([]uint64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dead {
		return dups, streamlog.ErrClosed
	}
	var rec *confirmRec
	if n := len(st.pend); n > 0 && st.pend[n-1].c == c && st.pend[n-1].pub == p.id {
		rec = &st.pend[n-1]
	}
	last := int64(-1)
	if p.ref != "" {
		last = st.sequenceLocked(p.ref)
	}
	for i := range msgs {
		m := &msgs[i]
		if p.ref != "" {
			if int64(m.PublishingID) <= last {
				dups = append(dups, m.PublishingID)
				continue
			}
			last = int64(m.PublishingID)
		}
		err := addEntry(st.batch, m)
		if errors.Is(err, streamlog.ErrBatchFull) && st.batch.Entries() > 0 {
			st.flushLocked()
			rec = nil
			err = addEntry(st.batch, m)
		}
		if err != nil {
			return dups, err
		}
		if rec == nil {
			st.pend = append(st.pend, confirmRec{c: c, pub: p.id, ids: make([]uint64, 0, len(msgs))})
			rec = &st.pend[len(st.pend)-1]
		}
		rec.ids = append(rec.ids, m.PublishingID)
	}
	if p.ref != "" && last >= 0 {
		st.seqs[p.ref] = last
		st.batchSeqs[p.ref] = uint64(last)
	}
	if len(dups) > 0 && st.batch.Entries() > 0 {
		st.pend = append(st.pend, confirmRec{c: c, pub: p.id, ids: append([]uint64(nil), dups...)})
		dups = dups[:0]
	}
	if st.fullLocked() {
		st.flushLocked()
	}
	return dups, nil
}

// addEntry adds a publish frame's entry (simple or sub-batch) to b; a
// simple message with a filter value (publish v2) goes into the chunk's
// bloom filter.
func addEntry(b *streamlog.Batch, m *proto.PublishedMessage) error {
	e := m.Entry
	if e[0]&0x80 == 0 {
		if m.Filter != "" {
			return b.AddFiltered(e[4:], m.Filter)
		}
		return b.AddSimple(e[4:])
	}
	return b.AddSubBatch((e[0]>>4)&0x7, binary.BigEndian.Uint16(e[1:3]), binary.BigEndian.Uint32(e[3:7]), e[11:])
}

// flush appends the batch as one chunk; confirms go out when the log says
// it is durable.
func (st *streamState) flush() {
	st.mu.Lock()
	st.flushLocked()
	st.mu.Unlock()
}

func (st *streamState) flushLocked() {
	if st.batch.Entries() == 0 || st.dead {
		return
	}
	for ref, seq := range st.batchSeqs {
		_ = st.batch.TrackPublisher(ref, seq) // refs are at most 255 bytes (declare checks)
	}
	clear(st.batchSeqs)
	pend := st.pend
	st.pend = make([]confirmRec, 0, len(pend))
	srv := st.srv
	if _, err := st.log.Append(st.batch, func(_ uint64, err error) { srv.confirm(pend, err) }); err != nil {
		srv.log.Warn("stream: append failed", "vhost", st.vhost, "stream", st.name, "err", err)
		srv.confirm(pend, err)
	}
	st.batch.Reset()
}

// confirm sends publish confirms (err nil) or errors for appended
// messages. It runs on the log's syncer goroutine and never blocks.
func (s *Server) confirm(pend []confirmRec, err error) {
	for i := range pend {
		r := &pend[i]
		if err == nil {
			s.Counters.Confirmed.Add(uint64(len(r.ids)))
			r.c.out.appendFn(func(b []byte) []byte { return proto.AppendPublishConfirm(b, r.pub, r.ids) })
			continue
		}
		pe := &proto.PublishError{PublisherID: r.pub, Errors: make([]proto.PublishingError, len(r.ids))}
		for j, id := range r.ids {
			pe.Errors[j] = proto.PublishingError{PublishingID: id, Code: proto.CodeInternalError}
		}
		r.c.out.send(pe)
	}
}
