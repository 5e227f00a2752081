package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Entry is one message in a queue.
type Entry struct {
	Seq         uint64
	ID          MsgID
	Persistent  bool
	Redelivered bool
	Data        []byte
}

// Options choose a queue's storage layout.
type Options struct {
	// Version is 1 or 2. Version 1 uses segments of 16384 entries, version 2
	// of 4096 (RabbitMQ's sizes).
	Version int
	// EmbedBelow: messages shorter than this are kept in the queue's own
	// files, others in the vhost's message store.
	EmbedBelow int
	// SegmentEntries overrides the version's segment size (tests).
	SegmentEntries int
}

func (o Options) segmentEntries() uint64 {
	if o.SegmentEntries > 0 {
		return uint64(o.SegmentEntries)
	}
	if o.Version == 1 {
		return 16384
	}
	return 4096
}

// Recovery describes what a queue found on disk.
type Recovery struct {
	Next  uint64 // next seq to use
	Count int
	Bytes int64
	Clean bool
}

const (
	entrySize = 32

	statusEmpty     = 0
	statusPublished = 1
	statusAcked     = 2
	statusDelivered = 3

	flagPersistent = 1
	flagExternal   = 2

	// maxOpenSegments bounds the segments of one queue whose files stay
	// open; the others are reopened on demand, so a queue of millions of
	// messages does not hold thousands of file descriptors.
	maxOpenSegments = 16

	cleanMarker = "clean"
	optionsFile = "options"
)

// QueueIndex is one classic queue's storage. Owned by the queue goroutine.
type QueueIndex struct {
	vs   *VhostStore
	dir  string
	opts Options
	segs map[uint64]*segment
	// openSegs counts segments with open files; useTick orders their use.
	openSegs int
	useTick  uint64
	// live counts published, unacked entries (persistent and transient).
	live  int
	bytes int64
	// next is one past the highest seq appended or recovered.
	next      uint64
	countRefs bool // recovery takes message-store references

	// Version 1 only: the journal and the entries it holds that are not yet
	// in segment files (all newer than any segment entry).
	journal      *os.File
	journalN     int64 // journal size
	journalRecs  int
	journalDirty bool
	jpend        map[uint64]*jentry

	// optsDirty: a new queue's options file is written but not yet
	// fsynced (see writeOptions). No descriptor is held meanwhile: a node
	// may hold many empty queues.
	optsDirty bool
}

type segment struct {
	num   uint64
	idx   *os.File // entries; nil while the segment's files are closed
	body  *os.File // embedded bodies; nil with idx
	bodyN int64    // body file size
	live  int
	// used is the queue's use tick when the files were last needed;
	// syncing counts fsync requests in flight on the syncer (the only
	// field touched by another goroutine). Files are closed only when
	// clean and not syncing, so no write ever misses its fsync.
	used    uint64
	syncing atomic.Int32
	// pendAcks are transient entries acked in memory whose acked status
	// is not yet written (see AckTransient); they count as gone in live.
	pendAcks []uint64
	// pending entries not yet written: contiguous run starting at pendOff.
	pend    []byte
	pendOff int64
	bodyBuf []byte
	dirty   bool
}

func openQueueIndex(vs *VhostStore, dir string, opts Options) (*QueueIndex, Recovery, error) {
	return openQueueIndexRefs(vs, dir, opts, true)
}

// openQueueIndexRefs opens an index; countRefs takes message-store
// references for its external entries (false when they are already counted).
func openQueueIndexRefs(vs *VhostStore, dir string, opts Options, countRefs bool) (*QueueIndex, Recovery, error) {
	if opts.Version == 0 {
		opts.Version = 2
	}
	if err := finishConversion(dir); err != nil {
		return nil, Recovery{}, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, Recovery{}, fmt.Errorf("store: create queue dir: %w", err)
	}
	q := &QueueIndex{vs: vs, dir: dir, opts: opts, segs: map[uint64]*segment{}, countRefs: countRefs}
	// A queue keeps the layout it was written with until Convert.
	if v, ok := readOptions(dir); ok {
		q.opts.Version = v
	} else {
		if err := writeOptions(dir, opts.Version); err != nil {
			return nil, Recovery{}, err
		}
		q.optsDirty = true
	}
	rec, err := q.recover()
	if err != nil {
		q.closeFiles()
		return nil, Recovery{}, err
	}
	return q, rec, nil
}

// readOptions reads the layout version a queue's files are in; false when
// the file is missing or unreadable (never made durable: no segment was
// written, see settleOptions).
func readOptions(dir string) (int, bool) {
	data, err := os.ReadFile(filepath.Join(dir, optionsFile))
	if err != nil {
		return 0, false
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || (v != 1 && v != 2) {
		return 0, false
	}
	return v, true
}

// writeOptions records a new queue's layout version without an fsync: a
// declare is durable in the metadata, which reopens the queue with the
// same options after a crash; the file needs to be durable only once the
// queue has files in that layout, and settleOptions makes it so before the
// first one is written.
func writeOptions(dir string, version int) error {
	path := filepath.Join(dir, optionsFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("store: write %s: %w", path, err)
	}
	_, err = f.Write([]byte(strconv.Itoa(version)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: write %s: %w", path, err)
	}
	return nil
}

// settleOptions makes a new queue's options file durable (and its entry
// in the queue's directory) before the queue writes its first file in
// that layout: a crash never leaves segments whose layout is unknown. A
// compare once it is done.
func (q *QueueIndex) settleOptions() error {
	if !q.optsDirty {
		return nil
	}
	path := filepath.Join(q.dir, optionsFile)
	f, err := os.Open(path) // fsync flushes the file's pages, whatever the descriptor's mode
	if err != nil {
		return fmt.Errorf("store: fsync %s: %w", path, err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return fmt.Errorf("store: fsync %s: %w", path, err)
	}
	q.optsDirty = false
	syncDir(q.dir)
	return nil
}

func writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("store: write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("store: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("store: fsync %s: %w", path, err)
	}
	f.Close()
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("store: rename %s: %w", path, err)
	}
	syncDir(filepath.Dir(path))
	return nil
}

// Version is the layout the queue's files are in.
func (q *QueueIndex) Version() int { return q.opts.Version }

func (q *QueueIndex) segPath(n uint64, ext string) string {
	return filepath.Join(q.dir, fmt.Sprintf("%012d.%s", n, ext))
}

func (q *QueueIndex) openSegment(n uint64) (*segment, error) {
	if s, ok := q.segs[n]; ok {
		return s, q.files(s)
	}
	s := &segment{num: n}
	if err := q.files(s); err != nil {
		return nil, err
	}
	st, err := s.body.Stat()
	if err != nil {
		q.closeSegment(s)
		return nil, fmt.Errorf("store: stat segment bodies: %w", err)
	}
	s.bodyN = st.Size()
	q.segs[n] = s
	return s, nil
}

// files opens s's files if they are closed and marks them used.
func (q *QueueIndex) files(s *segment) error {
	q.useTick++
	s.used = q.useTick
	if s.idx != nil {
		return nil
	}
	if err := q.settleOptions(); err != nil {
		return err
	}
	idx, err := os.OpenFile(q.segPath(s.num, "qi"), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("store: open segment: %w", err)
	}
	body, err := os.OpenFile(q.segPath(s.num, "qs"), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		idx.Close()
		return fmt.Errorf("store: open segment bodies: %w", err)
	}
	s.idx, s.body = idx, body
	q.openSegs++
	return nil
}

func (q *QueueIndex) closeSegment(s *segment) {
	if s.idx == nil {
		return
	}
	s.idx.Close()
	s.body.Close()
	s.idx, s.body = nil, nil
	q.openSegs--
}

// trimOpen closes the least recently used segments' files while more than
// maxOpenSegments are open, skipping the tail, dirty segments, segments
// with buffered writes and segments whose fsync is still in flight.
func (q *QueueIndex) trimOpen() {
	if q.openSegs <= maxOpenSegments {
		return
	}
	tail := q.tailSegment()
	var cands []*segment
	for _, s := range q.segs {
		if s.idx != nil && s.num != tail && !s.dirty && len(s.pend) == 0 && len(s.bodyBuf) == 0 && s.syncing.Load() == 0 {
			cands = append(cands, s)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].used < cands[j].used })
	for _, s := range cands {
		if q.openSegs <= maxOpenSegments {
			return
		}
		q.closeSegment(s)
	}
}

func (q *QueueIndex) tailSegment() uint64 {
	if q.next == 0 {
		return 0
	}
	return (q.next - 1) / q.opts.segmentEntries()
}

func (q *QueueIndex) dropSegment(s *segment) {
	q.closeSegment(s)
	delete(q.segs, s.num)
	_ = os.Remove(q.segPath(s.num, "qi"))
	_ = os.Remove(q.segPath(s.num, "qs"))
}

// Append writes entries (seqs increasing, each new to the queue). Embedded
// bodies go to the segment's body file (version 1: to the journal first),
// larger ones to the message store. Everything is handed to the OS before
// Append returns (Sync then makes it durable), and it is all or nothing: on
// error (a full disk) no entry of the batch is stored, referenced or
// counted, and nothing of it is found by Read or by recovery; the queue
// nacks the batch and carries on.
func (q *QueueIndex) Append(entries []Entry) error {
	if err := q.vs.msgs.writeBatch(entries, q.opts.EmbedBelow); err != nil {
		return err
	}
	var err error
	if q.journal != nil {
		err = q.journalAppend(entries)
	} else {
		err = q.appendSegments(entries)
	}
	if err != nil {
		for i := range entries {
			if len(entries[i].Data) >= q.opts.EmbedBelow {
				q.vs.msgs.Release(entries[i].ID)
			}
		}
		q.vs.disk.NoSpace(err)
	}
	return err
}

// buildEntry encodes en's index entry; body is what the segment's body file
// must hold (nil for a message-store message).
func (q *QueueIndex) buildEntry(en Entry) (e [entrySize]byte, body []byte) {
	e[0] = statusPublished
	if en.Persistent {
		e[1] |= flagPersistent
	}
	binary.BigEndian.PutUint64(e[8:], en.Seq)
	binary.BigEndian.PutUint64(e[16:], uint64(en.ID))
	binary.BigEndian.PutUint32(e[28:], uint32(len(en.Data)))
	if len(en.Data) >= q.opts.EmbedBelow {
		e[1] |= flagExternal
		return e, nil
	}
	return e, en.Data
}

// segUndo is a segment's state before a batch touched it.
type segUndo struct {
	s     *segment
	bodyN int64
	live  int
}

// appendSegments places entries and writes them through; on error it
// undoes the batch (see undoAppend).
func (q *QueueIndex) appendSegments(entries []Entry) error {
	live, bytes, next := q.live, q.bytes, q.next
	var touched []segUndo
	var reserve int64
	err := func() error {
		for _, en := range entries {
			e, body := q.buildEntry(en)
			if err := q.placeEntry(e, body, func(s *segment) error {
				if len(touched) > 0 && touched[len(touched)-1].s == s {
					return nil
				}
				// Start the segment with nothing buffered (only a
				// failed flush leaves anything), so what is buffered
				// from here is the batch's.
				if err := q.flushSegment(s); err != nil {
					return err
				}
				touched = append(touched, segUndo{s: s, bodyN: s.bodyN, live: s.live})
				return nil
			}); err != nil {
				return err
			}
			reserve += entrySize + int64(len(body))
		}
		q.vs.disk.Reserve(reserve)
		for _, t := range touched {
			if err := q.flushSegment(t.s); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		q.undoAppend(entries, touched)
		q.live, q.bytes, q.next = live, bytes, next
	}
	return err
}

// undoAppend takes a failed batch out of the segments: buffers dropped,
// bodies cut back, and any entry that reached a segment file emptied, so
// neither Read nor recovery finds it.
func (q *QueueIndex) undoAppend(entries []Entry, touched []segUndo) {
	E := q.opts.segmentEntries()
	for _, t := range touched {
		s := t.s
		s.pend, s.bodyBuf = s.pend[:0], s.bodyBuf[:0]
		s.live = t.live
		if s.idx == nil {
			continue
		}
		if s.bodyN > t.bodyN {
			_ = s.body.Truncate(t.bodyN)
			s.bodyN = t.bodyN
		}
		var st [1]byte
		for _, en := range entries {
			if en.Seq/E != s.num {
				continue
			}
			off := int64(en.Seq%E) * entrySize
			// A slot never written reads as zero (a hole, or past the end).
			if n, _ := s.idx.ReadAt(st[:], off); n == 1 && st[0] != statusEmpty {
				_, _ = s.idx.WriteAt([]byte{statusEmpty}, off)
				s.dirty = true
			}
		}
	}
}

// placeEntry puts a built entry (status included) into its segment: the
// body is appended to the segment's body file, the entry's offset and CRC
// set, and the entry buffered for its fixed position. touch (may be nil)
// is told the segment before it changes; its error stops the placement.
func (q *QueueIndex) placeEntry(e [entrySize]byte, body []byte, touch func(*segment) error) error {
	E := q.opts.segmentEntries()
	seq := binary.BigEndian.Uint64(e[8:])
	s, err := q.openSegment(seq / E)
	if err != nil {
		return err
	}
	if touch != nil {
		if err := touch(s); err != nil {
			return err
		}
	}
	if e[1]&flagExternal == 0 {
		binary.BigEndian.PutUint32(e[24:], uint32(s.bodyN+int64(len(s.bodyBuf))))
		s.bodyBuf = append(s.bodyBuf, body...)
	}
	binary.BigEndian.PutUint32(e[4:], entryCRC(e[:], body))
	off := int64(seq%E) * entrySize
	if len(s.pend) > 0 && s.pendOff+int64(len(s.pend)) != off {
		if err := q.flushSegment(s); err != nil {
			return err
		}
	}
	if len(s.pend) == 0 {
		s.pendOff = off
	}
	s.pend = append(s.pend, e[:]...)
	s.live++
	q.live++
	q.bytes += int64(binary.BigEndian.Uint32(e[28:]))
	if seq >= q.next {
		q.next = seq + 1
	}
	return nil
}

func (q *QueueIndex) flushSegment(s *segment) error {
	if len(s.bodyBuf) == 0 && len(s.pend) == 0 {
		return nil
	}
	if err := q.files(s); err != nil {
		return err
	}
	if len(s.bodyBuf) > 0 {
		if _, err := s.body.WriteAt(s.bodyBuf, s.bodyN); err != nil {
			return fmt.Errorf("store: write bodies: %w", err)
		}
		s.bodyN += int64(len(s.bodyBuf))
		s.bodyBuf = s.bodyBuf[:0]
		s.dirty = true
	}
	if len(s.pend) > 0 {
		if _, err := s.idx.WriteAt(s.pend, s.pendOff); err != nil {
			return fmt.Errorf("store: write entries: %w", err)
		}
		s.pend = s.pend[:0]
		s.dirty = true
	}
	return nil
}

// Flush hands buffered writes to the OS. Only the segment being appended to
// keeps its write buffers: the others give theirs back, so a long queue's
// memory does not grow with its number of segments.
func (q *QueueIndex) Flush() error {
	tail := q.tailSegment()
	for _, s := range q.segs {
		if err := q.flushSegment(s); err != nil {
			return err
		}
		if s.num != tail {
			s.pend, s.bodyBuf = nil, nil
		}
	}
	q.trimOpen()
	return nil
}

// maxPendingAcks bounds a segment's transient acks held in memory.
const maxPendingAcks = 1024

// maxBodySpan bounds the embedded bodies read with one pread.
const maxBodySpan = 8 << 20

// Len is the number of live entries and their bytes.
func (q *QueueIndex) Len() (int, int64) { return q.live, q.bytes }

// dirtyFiles flushes and returns the files to fsync, clearing their dirty
// marks; segs are the segments whose sync is now in flight.
func (q *QueueIndex) dirtyFiles() (files []*os.File, segs []*segment, err error) {
	if err := q.Flush(); err != nil {
		return nil, nil, err
	}
	for _, s := range q.segs {
		if s.dirty {
			// dirty implies open: trimOpen never closes a dirty segment.
			files = append(files, s.idx, s.body)
			s.dirty = false
			s.syncing.Add(1)
			segs = append(segs, s)
		}
	}
	if q.journal != nil && q.journalDirty {
		files = append(files, q.journal)
		q.journalDirty = false
	}
	return files, segs, nil
}

// Sync makes everything appended or acked so far durable (group commit):
// done is called from the vhost's syncer goroutine. It never blocks.
func (q *QueueIndex) Sync(ctx context.Context, done func(error)) {
	files, segs, err := q.dirtyFiles()
	if err != nil {
		done(err)
		return
	}
	q.vs.syncer.request(ctx, files, func(err error) {
		for _, s := range segs {
			s.syncing.Add(-1)
		}
		done(err)
	})
}

// Purge acks every live entry.
func (q *QueueIndex) Purge() error {
	var seqs []uint64
	if _, err := q.Read(0, int(^uint(0)>>1), 0, func(e Entry) { seqs = append(seqs, e.Seq) }); err != nil {
		return err
	}
	return q.Ack(seqs)
}

// Close flushes and fsyncs the queue's files; clean records a clean shutdown.
func (q *QueueIndex) Close(clean bool) error {
	var errs []error
	if err := q.applyAllAcks(); err != nil {
		errs = append(errs, err)
	}
	if q.journal != nil {
		if err := q.flushJournal(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := q.Flush(); err != nil {
		errs = append(errs, err)
	}
	if err := q.settleOptions(); err != nil {
		errs = append(errs, err)
	}
	for _, s := range q.segs {
		if s.idx == nil {
			continue // closed only once clean and synced
		}
		if err := s.idx.Sync(); err != nil {
			errs = append(errs, err)
		}
		if err := s.body.Sync(); err != nil {
			errs = append(errs, err)
		}
	}
	q.closeFiles()
	if clean && len(errs) == 0 {
		if err := writeFileSync(filepath.Join(q.dir, cleanMarker), nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (q *QueueIndex) closeFiles() {
	if q.journal != nil {
		q.journal.Close()
		q.journal = nil
	}
	for _, s := range q.segs {
		q.closeSegment(s)
	}
	q.segs = map[uint64]*segment{}
}

// Delete releases the queue's message-store references, closes its files
// and removes its directory.
func (q *QueueIndex) Delete() error {
	q.releaseAll()
	q.closeFiles()
	if err := os.RemoveAll(q.dir); err != nil {
		return fmt.Errorf("store: delete queue files: %w", err)
	}
	syncDir(filepath.Dir(q.dir))
	return nil
}
