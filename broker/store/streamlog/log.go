package streamlog

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// SyncPolicy says when appended chunks become durable.
type SyncPolicy int

const (
	// SyncGroup (the default) fsyncs the segment and index files after
	// appends: one fsync serves every chunk appended while the previous one
	// ran (group commit). A chunk is durable, and readable, once fsynced.
	SyncGroup SyncPolicy = iota
	// SyncNone never fsyncs: a chunk is "durable", and readable, as soon
	// as it is written to the OS (replicated logs that rely on a quorum).
	SyncNone
)

// Defaults of Options.
const (
	DefaultMaxSegmentBytes  = 500_000_000 // RabbitMQ's x-stream-max-segment-size-bytes default
	DefaultMaxSegmentChunks = 256_000     // osiris's max_segment_size_chunks default
	maxSegmentFileBytes     = 1<<32 - 1   // index positions are 32 bits
)

// Options configure a Log. The zero value is usable.
type Options struct {
	// MaxSegmentBytes rolls to a new segment once the active one would
	// grow past it (a segment always holds at least one chunk). Default
	// DefaultMaxSegmentBytes; at most 4 GiB.
	MaxSegmentBytes int64
	// MaxSegmentChunks rolls after that many chunks. Default
	// DefaultMaxSegmentChunks.
	MaxSegmentChunks int
	// MaxBytes, if > 0, is retention by size (x-max-length-bytes): whole
	// segments, oldest first, are removed while the log is larger. The
	// active segment is never removed.
	MaxBytes int64
	// MaxAge, if > 0, is retention by age (x-max-age): a segment whose
	// newest chunk is older is removed (never the active one).
	MaxAge time.Duration
	// Sync is the durability policy (default SyncGroup).
	Sync SyncPolicy
	// FilterSize is the size in bytes of the bloom filter of chunks with
	// filter values (stream-filter-size-bytes): MinFilterSize to
	// MaxFilterSize, default DefaultFilterSize.
	FilterSize int
	// Epoch is written in every chunk header (the Raft term, later).
	Epoch uint64
	// Now is the clock (default time.Now); chunk timestamps come from it.
	Now func() time.Time
	// Log receives the repairs recovery makes, at warn (default
	// slog.Default()).
	Log *slog.Logger
	// Disk (may be nil) is told what is about to be written and when a
	// write finds the disk full, for the disk alarm.
	Disk Disk
}

// Disk is what the log tells about its writes, for the disk alarm
// (store.DiskWatch).
type Disk interface {
	// Reserve is called before n bytes are written.
	Reserve(n int64)
	// NoSpace is told a write's error; it reports whether it was a full
	// disk.
	NoSpace(err error) bool
}

// noDisk is the Disk of a log that reports to nobody.
type noDisk struct{}

func (noDisk) Reserve(int64)      {}
func (noDisk) NoSpace(error) bool { return false }

func (o *Options) defaults() {
	if o.MaxSegmentBytes <= 0 {
		o.MaxSegmentBytes = DefaultMaxSegmentBytes
	}
	if o.MaxSegmentBytes > maxSegmentFileBytes {
		o.MaxSegmentBytes = maxSegmentFileBytes
	}
	if o.MaxSegmentChunks <= 0 {
		o.MaxSegmentChunks = DefaultMaxSegmentChunks
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Disk == nil {
		o.Disk = noDisk{}
	}
	if o.FilterSize == 0 {
		o.FilterSize = DefaultFilterSize
	}
	o.FilterSize = min(max(o.FilterSize, MinFilterSize), MaxFilterSize)
}

// DoneFunc is told when an appended chunk is durable (err nil) or can no
// longer become durable (err set). It runs on the log's syncer goroutine:
// it must not block and must not call Append.
type DoneFunc func(chunkID uint64, err error)

// segment is one segment file and its index, as known in memory.
type segment struct {
	base    uint64 // chunk id of its first chunk (the file name)
	size    int64  // bytes written (final once the segment is rolled)
	chunks  int
	firstTS int64
	lastTS  int64
	// tracking reports whether the segment starts with a tracking snapshot.
	snapshot bool
}

func (s *segment) segPath(dir string) string { return filepath.Join(dir, segName(s.base)) }
func (s *segment) idxPath(dir string) string { return filepath.Join(dir, idxName(s.base)) }

func segName(base uint64) string { return fmt.Sprintf("%020d.segment", base) }
func idxName(base uint64) string { return fmt.Sprintf("%020d.index", base) }

// point is a position in the log: the end of a chunk.
type point struct {
	seg     *segment
	end     int64  // file position after the chunk
	last    int64  // its chunk id, -1 before any chunk
	next    uint64 // next offset
	lastUsr int64  // the last user chunk's id up to here, -1 if none
}

type pending struct {
	upto point
	done DoneFunc
	id   uint64
}

type rolledFiles struct {
	seg, idx *os.File
	idxBuf   []byte
}

// Log is one stream's on-disk log. It is safe for concurrent use: Append,
// the tracking queries, Stats and NewReader may be called from any
// goroutine (appends are serialized). Durability callbacks run on the
// log's syncer goroutine. Lock order: Log.mu is a leaf (no callback runs
// under it).
type Log struct {
	dir  string
	opts Options

	mu       sync.Mutex
	segs     []*segment // oldest first; the last one is active
	seg, idx *os.File   // active files, written by Append (seg) and the syncer (idx)
	written  point      // end of the last chunk written
	commit   point      // end of the last durable chunk
	lastTS   int64
	writers  map[string]uint64 // publisher ref -> last publishing id
	offsets  map[string]uint64 // consumer ref -> stored offset
	pend     []pending
	pendIdx  []byte // index records of the active segment not yet written
	rolled   []rolledFiles
	dirDirty bool
	notify   chan struct{} // closed and replaced when commit advances
	failed   error
	closed   bool
	wake     chan struct{}
	stopped  chan struct{}

	lock *os.File // flock'ed: one Log per directory
	// trackingScans counts sealed segments read at recovery for tracking.
	trackingScans int
	stopRet       chan struct{}

	spareIdx  []byte
	sparePend []pending
	wbuf      []byte // scratch: chunks of batches without entries
	tbuf      []byte // scratch: tracking data
}

// Open opens (creating if needed) the log in dir and recovers it: the last
// segment is checked chunk by chunk (CRC, chain of chunk ids) and cut after
// its last whole chunk, its index is rebuilt, and the tracking state
// (consumer offsets, publisher sequences) is read back.
func Open(dir string, opts Options) (*Log, error) {
	opts.defaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("streamlog: create %s: %w", dir, err)
	}
	l := &Log{
		dir:     dir,
		opts:    opts,
		writers: make(map[string]uint64),
		offsets: make(map[string]uint64),
		notify:  make(chan struct{}),
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	l.lock = lock
	if err := l.recover(); err != nil {
		l.closeFiles()
		lock.Close()
		return nil, fmt.Errorf("streamlog: open %s: %w", dir, err)
	}
	go l.syncLoop()
	if opts.MaxAge > 0 {
		l.stopRet = make(chan struct{})
		go l.retentionLoop(min(max(opts.MaxAge/10, time.Second), time.Minute))
	}
	return l, nil
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Append writes the batch as one user chunk, followed (in the same write)
// by a tracking chunk if the batch has consumer offsets (or publisher
// sequences without entries). It returns the id of the user chunk (the
// offset of its first message), or of the tracking chunk if the batch has
// no entries. It never waits for the disk: done (may be nil) is called
// once the chunk(s) are durable (see SyncPolicy), and readers see them
// from then on. The batch may be Reset and reused as soon as Append
// returns.
func (l *Log) Append(b *Batch, done DoneFunc) (uint64, error) {
	if b.Empty() {
		return 0, ErrEmptyBatch
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if l.failed != nil {
		return 0, l.failed
	}
	ts := l.opts.Now().UnixMilli()
	if ts < l.lastTS {
		ts = l.lastTS
	}
	nchunks := 0
	var total int64
	filtered := b.entries > 0 && len(b.filters) > 0
	if b.entries > 0 {
		nchunks++
		total += int64(len(b.buf) + len(b.trailer))
		if filtered {
			total += int64(l.opts.FilterSize)
		}
	}
	trk := len(b.offRefs) > 0 || (b.entries == 0 && len(b.seqRefs) > 0)
	if trk {
		nchunks++
		total += HeaderSize + int64(len(b.offsets))
		if b.entries == 0 {
			total += int64(len(b.trailer))
		}
	}
	if total > maxSegmentFileBytes-FileHeaderSize {
		return 0, ErrBatchFull
	}
	cur := l.segs[len(l.segs)-1]
	onlySnapshot := cur.snapshot && cur.chunks == 1
	if cur.chunks > 0 && !onlySnapshot && (cur.size+total > l.opts.MaxSegmentBytes || cur.chunks+nchunks > l.opts.MaxSegmentChunks) {
		if err := l.roll(ts); err != nil {
			return 0, err
		}
		cur = l.segs[len(l.segs)-1]
	}

	start := cur.size
	pos := start
	w := l.written
	var first uint64
	var buf []byte
	dataEnd := len(b.buf)
	switch {
	case filtered:
		first = w.next
		buf = b.sealFiltered(l.wbuf, l.opts.FilterSize, first, ts, l.opts.Epoch)
		buf = append(buf, b.trailer...)
	case b.entries > 0:
		first = w.next
		buf = b.seal(first, ts, l.opts.Epoch)
		buf = append(buf, b.trailer...)
	default:
		buf = l.wbuf[:0]
	}
	if b.entries > 0 {
		l.addIndex(indexRecord{ChunkID: first, Timestamp: ts, Epoch: l.opts.Epoch, Pos: uint32(pos), Type: ChunkUser})
		pos += int64(len(buf))
		w.last, w.lastUsr, w.next = int64(first), int64(first), first+uint64(b.records)
	}
	if trk {
		id := w.next
		data := b.offsets
		if b.entries == 0 {
			first = id
			for _, p := range b.seqPos {
				putUint64(b.trailer[p:], id)
			}
			l.tbuf = append(append(l.tbuf[:0], b.offsets...), b.trailer...)
			data = l.tbuf
		}
		n := len(buf)
		buf = buildTracking(buf, ChunkTrackingDelta, data, id, ts, l.opts.Epoch)
		l.addIndex(indexRecord{ChunkID: id, Timestamp: ts, Epoch: l.opts.Epoch, Pos: uint32(pos), Type: ChunkTrackingDelta})
		pos += int64(len(buf) - n)
		w.last, w.next = int64(id), id+1
	}
	l.opts.Disk.Reserve(int64(len(buf)))
	_, err := l.seg.Write(buf)
	if b.entries > 0 && !filtered {
		b.buf = buf[:dataEnd]
	} else {
		l.wbuf = buf[:0]
	}
	if err != nil {
		// Undo the partial write so the file ends on a whole chunk.
		l.pendIdx = l.pendIdx[:len(l.pendIdx)-nchunks*IndexRecordSize]
		if terr := l.seg.Truncate(start); terr != nil {
			l.failed = fmt.Errorf("streamlog: append to %s: %w (and truncate: %v)", l.dir, err, terr)
		} else if _, serr := l.seg.Seek(start, 0); serr != nil {
			l.failed = fmt.Errorf("streamlog: append to %s: %w (and seek: %v)", l.dir, err, serr)
		}
		l.opts.Disk.NoSpace(err)
		return 0, fmt.Errorf("streamlog: append to %s: %w", l.dir, err)
	}
	cur.size = pos
	if cur.chunks == 0 {
		cur.firstTS = ts
	}
	cur.chunks += nchunks
	cur.lastTS = ts
	l.lastTS = ts
	w.seg, w.end = cur, pos
	l.written = w
	for i, ref := range b.seqRefs {
		l.writers[ref] = b.seqVals[i]
	}
	for i, ref := range b.offRefs {
		l.offsets[ref] = b.offVals[i]
	}
	l.pend = append(l.pend, pending{upto: w, done: done, id: first})
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return first, nil
}

func (l *Log) addIndex(r indexRecord) {
	n := len(l.pendIdx)
	l.pendIdx = append(l.pendIdx, make([]byte, IndexRecordSize)...)
	r.put(l.pendIdx[n:])
}

// PublisherSequence returns the last publishing id stored for the named
// publisher (publisher de-duplication), and whether there is one.
func (l *Log) PublisherSequence(ref string) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.writers[ref]
	return v, ok
}

// QueryOffset returns the offset stored under a consumer reference, and
// whether there is one.
func (l *Log) QueryOffset(ref string) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.offsets[ref]
	return v, ok
}

// StoreOffset appends a tracking chunk storing offset under ref. It is
// Append of a batch holding just that offset; done may be nil.
func (l *Log) StoreOffset(ref string, offset uint64, done DoneFunc) error {
	b := NewBatch()
	if err := b.TrackOffset(ref, offset); err != nil {
		return err
	}
	_, err := l.Append(b, done)
	return err
}

// Committed returns the id of the last durable chunk (-1 if none) and the
// next offset, cheaply (for the stream protocol's deliver v2 and credit
// decisions).
func (l *Log) Committed() (chunkID int64, next uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.commit.last, l.commit.next
}

// Stats describe a log. Chunk ids and offsets are -1 when there is none.
type Stats struct {
	FirstOffset      int64 // first offset still in the log (first chunk id)
	LastOffset       int64 // offset of the last durable record
	FirstChunkID     int64
	LastChunkID      int64 // last chunk written
	CommittedChunkID int64 // last durable chunk
	NextOffset       uint64
	FirstTimestamp   int64 // ms; 0 if empty
	Bytes            int64 // bytes of all segment files
	Segments         int
}

// Stats returns the log's current figures.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{
		FirstOffset: -1, LastOffset: -1, FirstChunkID: -1,
		LastChunkID:      l.written.last,
		CommittedChunkID: l.commit.last,
		NextOffset:       l.commit.next,
		Segments:         len(l.segs),
	}
	for _, sg := range l.segs {
		s.Bytes += sg.size
	}
	if f := l.segs[0]; f.chunks > 0 && l.commit.next > f.base {
		s.FirstOffset, s.FirstChunkID, s.FirstTimestamp = int64(f.base), int64(f.base), f.firstTS
		s.LastOffset = int64(l.commit.next) - 1
	}
	return s
}

// Close waits for pending appends to become durable, then closes the
// files. Readers still open return ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	<-l.stopped
	if l.stopRet != nil {
		close(l.stopRet)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.failed
	close(l.notify)
	l.notify = nil
	if cerr := l.closeFiles(); err == nil {
		err = cerr
	}
	l.lock.Close() // releases the flock
	return err
}

// retentionLoop applies age retention periodically, for logs that stop
// growing (retention otherwise runs when a segment is rolled).
func (l *Log) retentionLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.ApplyRetention()
		case <-l.stopRet:
			return
		}
	}
}

// lockDir takes an exclusive flock on dir's lock file: two Logs on one
// directory would corrupt it.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("streamlog: lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("streamlog: %s is already open: %w", dir, err)
	}
	return f, nil
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	_ = l.Close()
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("streamlog: delete %s: %w", l.dir, err)
	}
	return nil
}

func (l *Log) closeFiles() error {
	var err error
	for _, f := range []*os.File{l.seg, l.idx} {
		if f != nil {
			if cerr := f.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}
	l.seg, l.idx = nil, nil
	return err
}
