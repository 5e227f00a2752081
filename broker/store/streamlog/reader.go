package streamlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// DefaultReadAheadLimit is the default read-ahead limit (the vhost's
// stream-read-ahead-limit default).
const DefaultReadAheadLimit = 4096

// ReadAhead is a read-ahead setting shared by readers (one per vhost) and
// changeable at runtime: every read of a Reader loads it atomically.
type ReadAhead struct{ v atomic.Int64 } // limit if on, -limit-1 if off

// NewReadAhead returns a setting.
func NewReadAhead(on bool, limit int) *ReadAhead {
	r := &ReadAhead{}
	r.Set(on, limit)
	return r
}

// Set changes the setting; readers use it from their next read.
func (r *ReadAhead) Set(on bool, limit int) {
	if limit < 0 {
		limit = 0
	}
	if on {
		r.v.Store(int64(limit))
	} else {
		r.v.Store(-int64(limit) - 1)
	}
}

// Get returns whether read-ahead is on and its limit in bytes.
func (r *ReadAhead) Get() (on bool, limit int) {
	v := r.v.Load()
	if v >= 0 {
		return true, int(v)
	}
	return false, int(-v - 1)
}

// OffsetKind selects where a reader starts.
type OffsetKind uint8

// Offset specifications, as the stream protocol's subscribe.
const (
	// OffsetFirst starts at the first chunk in the log.
	OffsetFirst OffsetKind = iota
	// OffsetLast starts at the last user chunk (so the consumer gets its
	// messages), or at the next one if there is none.
	OffsetLast
	// OffsetNext starts after the last durable chunk: new messages only.
	OffsetNext
	// OffsetAbsolute starts at the chunk holding Offset (clamped to the
	// log: before the first chunk means the first, past the end means
	// next). The chunk may begin before Offset: consumers skip records
	// before the offset they asked for.
	OffsetAbsolute
	// OffsetTimestamp starts at the first chunk whose timestamp is at or
	// after Timestamp (milliseconds), or next if there is none.
	OffsetTimestamp
)

// OffsetSpec is where a Reader starts.
type OffsetSpec struct {
	Kind      OffsetKind
	Offset    uint64 // for OffsetAbsolute
	Timestamp int64  // for OffsetTimestamp, ms since the Unix epoch
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// ReadAhead is the read-ahead setting, consulted at every read; nil
	// means on with DefaultReadAheadLimit. With read-ahead on, a read at a
	// chunk boundary fetches limit bytes: a chunk smaller than the limit
	// and the chunks following it (up to the limit) are then served from
	// memory with no further read. With it off, a chunk costs a header
	// read and a data read (or a file section).
	ReadAhead *ReadAhead
	// FileSections hands out chunks that are not already in memory (those
	// at or above the read-ahead limit, all of them with read-ahead off)
	// as file sections, for sendfile, instead of reading them.
	FileSections bool
	// SectionMin, with FileSections, is the chunk size (header, data and
	// trailer) from which chunks are handed out as file sections; smaller
	// ones are read into memory. 0: every chunk not in memory.
	SectionMin int64
	// BeforeClose, if set, is called before the reader closes a segment
	// file (it moves on to the next segment, or is closed): it returns
	// once file sections of that file handed out earlier are sent, so
	// that a caller may keep several in flight.
	BeforeClose func()
	// Tracking also yields tracking chunks (for replication); consumers
	// see user chunks only.
	Tracking bool
	// Filter, if not nil, skips user chunks whose bloom filter shows they
	// hold no message the filter wants (see Filter). A chunk it yields may
	// still hold other messages: consumers filter messages themselves.
	Filter *Filter
}

// ReaderStats count a reader's work.
type ReaderStats struct {
	Reads     int64 // read syscalls (pread) made
	BytesRead int64
	Chunks    int64 // chunks handed out
	Skipped   int64 // chunks skipped by the filter
}

var defaultReadAhead = NewReadAhead(true, DefaultReadAheadLimit)

// Reader reads a log's durable chunks in order from its start position,
// waiting at the tail for new ones. A Reader belongs to one goroutine.
type Reader struct {
	l      *Log
	opts   ReaderOptions
	seg    *segment
	f      *os.File
	pos    int64
	buf    []byte // holds file bytes [bufPos, bufPos+len(buf))
	bufPos int64
	chunk  Chunk
	stats  ReaderStats
	closed bool
	end    int64 // known readable end of seg (commit only grows)
	match  *matcher
}

// NewReader returns a reader positioned by spec.
func (l *Log) NewReader(spec OffsetSpec, opts ReaderOptions) (*Reader, error) {
	if opts.ReadAhead == nil {
		opts.ReadAhead = defaultReadAhead
	}
	r := &Reader{l: l, opts: opts, match: newMatcher(opts.Filter)}
	for attempt := 0; ; attempt++ {
		seg, pos, err := l.locate(spec)
		if err != nil {
			return nil, err
		}
		r.seg, r.pos = seg, pos
		err = r.open()
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, os.ErrNotExist) || attempt > 3 {
			return nil, err
		}
		// Removed by retention meanwhile: locate again.
	}
}

// locate resolves an offset spec to a segment and position.
func (l *Log) locate(spec OffsetSpec) (*segment, int64, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, 0, ErrClosed
	}
	c := l.commit
	first := l.segs[0]
	type segInfo struct {
		s      *segment
		chunks int
		lastTS int64
	}
	segs := make([]segInfo, len(l.segs))
	for i, s := range l.segs {
		segs[i] = segInfo{s, s.chunks, s.lastTS}
	}
	l.mu.Unlock()
	next := func() (*segment, int64, error) {
		if c.seg.base < first.base {
			// Retention removed the committed tail's segment (a tiny
			// MaxBytes): wait at the start of what is left.
			return first, FileHeaderSize, nil
		}
		return c.seg, c.end, nil
	}
	target := spec.Offset
	switch spec.Kind {
	case OffsetFirst:
		return first, FileHeaderSize, nil
	case OffsetNext:
		return next()
	case OffsetLast:
		if c.lastUsr < 0 || uint64(c.lastUsr) < first.base {
			return next()
		}
		target = uint64(c.lastUsr)
	case OffsetAbsolute:
		if target >= c.next {
			return next()
		}
		if target < first.base {
			return first, FileHeaderSize, nil
		}
	case OffsetTimestamp:
		for _, si := range segs {
			s := si.s
			if s.base > c.seg.base {
				break
			}
			if si.chunks == 0 || si.lastTS < spec.Timestamp {
				continue
			}
			pos, ok, err := l.searchIndex(s, func(r indexRecord) bool { return r.Timestamp >= spec.Timestamp })
			if err != nil {
				return nil, 0, err
			}
			if ok && (s.base < c.seg.base || pos < c.end) {
				return s, pos, nil
			}
		}
		return next()
	default:
		return nil, 0, fmt.Errorf("streamlog: unknown offset kind %d", spec.Kind)
	}
	// The segment holding target: the last one whose base is <= target.
	var s *segment
	for _, x := range segs {
		if x.s.base <= target {
			s = x.s
		}
	}
	if s == nil {
		return first, FileHeaderSize, nil
	}
	// The chunk holding target is the last one whose id is <= target: the
	// record before the first one whose id is > target.
	pos, ok, err := l.searchIndexLast(s, target)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return s, FileHeaderSize, nil
	}
	return s, pos, nil
}

// indexCount is the number of records in s's index file.
func (l *Log) openIndex(s *segment) (*os.File, int64, error) {
	_, ip := l.paths(s.base)
	x, err := os.Open(ip)
	if err != nil {
		return nil, 0, err
	}
	st, err := x.Stat()
	if err != nil {
		x.Close()
		return nil, 0, err
	}
	n := (st.Size() - FileHeaderSize) / IndexRecordSize
	if n < 0 {
		n = 0
	}
	return x, n, nil
}

// searchIndex finds the first index record of s satisfying pred (which
// must be monotonic) and returns its position.
func (l *Log) searchIndex(s *segment, pred func(indexRecord) bool) (int64, bool, error) {
	x, n, err := l.openIndex(s)
	if err != nil {
		return 0, false, err
	}
	defer x.Close()
	var b [IndexRecordSize]byte
	lo, hi := int64(0), n
	var found indexRecord
	ok := false
	for lo < hi {
		m := (lo + hi) / 2
		if _, err := x.ReadAt(b[:], FileHeaderSize+m*IndexRecordSize); err != nil {
			return 0, false, fmt.Errorf("streamlog: read index: %w", err)
		}
		r := parseIndexRecord(b[:])
		if pred(r) {
			found, ok, hi = r, true, m
		} else {
			lo = m + 1
		}
	}
	return int64(found.Pos), ok, nil
}

// searchIndexLast finds the last index record of s whose chunk id is <=
// target.
func (l *Log) searchIndexLast(s *segment, target uint64) (int64, bool, error) {
	x, n, err := l.openIndex(s)
	if err != nil {
		return 0, false, err
	}
	defer x.Close()
	var b [IndexRecordSize]byte
	lo, hi := int64(0), n
	var found indexRecord
	ok := false
	for lo < hi {
		m := (lo + hi) / 2
		if _, err := x.ReadAt(b[:], FileHeaderSize+m*IndexRecordSize); err != nil {
			return 0, false, fmt.Errorf("streamlog: read index: %w", err)
		}
		r := parseIndexRecord(b[:])
		if r.ChunkID <= target {
			found, ok, lo = r, true, m+1
		} else {
			hi = m
		}
	}
	return int64(found.Pos), ok, nil
}

func (r *Reader) open() error {
	r.closeFile()
	sp, _ := r.l.paths(r.seg.base)
	f, err := os.Open(sp)
	if err != nil {
		return fmt.Errorf("streamlog: open segment: %w", err)
	}
	r.f = f
	r.buf = r.buf[:0]
	r.bufPos = 0
	r.end = 0
	return nil
}

// limits returns how far the reader may read in its segment, whether the
// segment is sealed (complete and durable), and the channel closed at the
// next commit.
func (r *Reader) limits() (end int64, sealed bool, notify chan struct{}, err error) {
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, false, nil, ErrClosed
	}
	c := l.commit
	switch {
	case r.seg.base < c.seg.base:
		return r.seg.size, true, l.notify, nil
	case r.seg.base == c.seg.base:
		return c.end, false, l.notify, nil
	default:
		return r.pos, false, l.notify, nil
	}
}

// advance moves the reader to the segment after its current one (or to
// the first one, if retention removed what came between).
func (r *Reader) advance() error {
	l := r.l
	l.mu.Lock()
	var nx *segment
	for _, s := range l.segs {
		if s.base > r.seg.base {
			nx = s
			break
		}
	}
	l.mu.Unlock()
	if nx == nil {
		return fmt.Errorf("%w: no segment after %d", ErrCorrupt, r.seg.base)
	}
	r.seg, r.pos = nx, FileHeaderSize
	err := r.open()
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed meanwhile: Next locates it again (via open)
	}
	return err
}

// Next returns the next chunk, waiting for one at the tail until ctx is
// done. The chunk is valid until the next call on r.
func (r *Reader) Next(ctx context.Context) (*Chunk, error) {
	return r.next(ctx, true)
}

// TryNext returns the next chunk if one is durable already, or nil.
func (r *Reader) TryNext() (*Chunk, error) {
	return r.next(context.Background(), false)
}

func (r *Reader) next(ctx context.Context, wait bool) (*Chunk, error) {
	if r.closed {
		return nil, ErrClosed
	}
	for {
		if r.f == nil {
			// The segment vanished (retention): restart at the first one.
			r.l.mu.Lock()
			r.seg, r.pos = r.l.segs[0], FileHeaderSize
			r.l.mu.Unlock()
			if err := r.open(); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			continue
		}
		if r.pos >= r.end {
			end, sealed, notify, err := r.limits()
			if err != nil {
				return nil, err
			}
			r.end = end
			if r.pos >= end {
				if sealed {
					if err := r.advance(); err != nil {
						return nil, err
					}
					continue
				}
				if !wait {
					return nil, nil
				}
				select {
				case <-notify:
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		end := r.end
		on, limit := r.opts.ReadAhead.Get()
		off := r.pos - r.bufPos
		if r.pos < r.bufPos || off+HeaderSize > int64(len(r.buf)) {
			n := int64(HeaderSize)
			if r.match != nil {
				n += MaxFilterSize
			}
			if on && int64(limit) > n {
				n = int64(limit)
			}
			if err := r.read(r.pos, min(n, end-r.pos)); err != nil {
				return nil, err
			}
			off = 0
		}
		// The header is parsed into the chunk to return, in place (see
		// Header.parse); the previous chunk is the caller's only until
		// this call.
		c := &r.chunk
		h := &c.Header
		if err := h.parse(r.buf[off:]); err != nil {
			return nil, fmt.Errorf("streamlog: segment %d at %d: %w", r.seg.base, r.pos, err)
		}
		size := h.Size()
		if r.pos+size > end {
			return nil, fmt.Errorf("%w: segment %d: chunk %d at %d overruns the log", ErrCorrupt, r.seg.base, h.ChunkID, r.pos)
		}
		if h.Type != ChunkUser && !r.opts.Tracking {
			r.pos += size
			continue
		}
		if r.match != nil && h.Type == ChunkUser {
			bl := int64(h.BloomSize)
			if off+HeaderSize+bl > int64(len(r.buf)) {
				if err := r.read(r.pos, HeaderSize+bl); err != nil {
					return nil, err
				}
				off = 0
			}
			if !r.match.match(r.buf[off+HeaderSize : off+HeaderSize+bl]) {
				r.pos += size
				r.stats.Skipped++
				continue
			}
		}
		c.file, c.pos = r.f, r.pos
		switch {
		case off+size <= int64(len(r.buf)):
		case on && size < int64(limit):
			if err := r.read(r.pos, min(int64(limit), end-r.pos)); err != nil {
				return nil, err
			}
			off = 0
		case r.opts.FileSections && size >= r.opts.SectionMin:
			copy(c.hdr[:], r.buf[off:off+HeaderSize])
			c.raw = nil
			r.pos += size
			r.stats.Chunks++
			return c, nil
		default:
			if err := r.readRest(off, size); err != nil {
				return nil, err
			}
			off = 0
		}
		c.raw = r.buf[off : off+size]
		r.pos += size
		r.stats.Chunks++
		return c, nil
	}
}

// read fills the buffer with n bytes of the segment from pos: one pread.
func (r *Reader) read(pos, n int64) error {
	if int64(cap(r.buf)) < n {
		r.buf = make([]byte, n, max(n, 2*int64(cap(r.buf))))
	}
	r.buf = r.buf[:n]
	got, err := r.f.ReadAt(r.buf, pos)
	r.stats.Reads++
	r.stats.BytesRead += int64(got)
	if int64(got) < n {
		r.buf = r.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("streamlog: read segment %d at %d: %w", r.seg.base, pos, err)
	}
	r.bufPos = pos
	return nil
}

// readRest makes the buffer hold the whole chunk of size bytes at r.pos,
// whose first bytes it holds from off: they move to the front and one
// pread fetches the rest. A chunk just over the read-ahead limit is thus
// read once, not its first limit bytes twice.
func (r *Reader) readRest(off, size int64) error {
	have := int64(len(r.buf)) - off
	if int64(cap(r.buf)) < size {
		// Exactly the chunk: the buffer stays the size of the largest
		// chunk read into memory (below SectionMin with file sections).
		nb := make([]byte, size)
		copy(nb, r.buf[off:])
		r.buf = nb
	} else {
		if off > 0 {
			copy(r.buf, r.buf[off:])
		}
		r.buf = r.buf[:size]
	}
	r.bufPos = r.pos
	got, err := r.f.ReadAt(r.buf[have:], r.pos+have)
	r.stats.Reads++
	r.stats.BytesRead += int64(got)
	if int64(got) < size-have {
		r.buf = r.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("streamlog: read segment %d at %d: %w", r.seg.base, r.pos+have, err)
	}
	return nil
}

// Stats returns the reader's counters.
func (r *Reader) Stats() ReaderStats { return r.stats }

// Close releases the reader's file.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return r.closeFile()
}

func (r *Reader) closeFile() error {
	if r.f == nil {
		return nil
	}
	if r.opts.BeforeClose != nil {
		r.opts.BeforeClose()
	}
	err := r.f.Close()
	r.f = nil
	return err
}
