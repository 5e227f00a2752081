package streamlog

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/warrenmq/warren/broker/datasync"
)

// createSegment creates the segment and index files starting at base.
func (l *Log) createSegment(base uint64) (seg, idx *os.File, err error) {
	s := &segment{base: base}
	seg, err = os.OpenFile(s.segPath(l.dir), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("create segment: %w", err)
	}
	if _, err = seg.Write(fileHeader(segmentMagic)); err != nil {
		seg.Close()
		return nil, nil, fmt.Errorf("write segment header: %w", err)
	}
	idx, err = os.OpenFile(s.idxPath(l.dir), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		seg.Close()
		return nil, nil, fmt.Errorf("create index: %w", err)
	}
	if _, err = idx.Write(fileHeader(indexMagic)); err != nil {
		seg.Close()
		idx.Close()
		return nil, nil, fmt.Errorf("write index header: %w", err)
	}
	return seg, idx, nil
}

// roll closes the active segment (after fsyncing its data, so that sealed
// segments are always whole on disk) and starts a new one at the next
// offset, opened by a tracking snapshot (even of an empty state: recovery
// then never reads further back than the last segment that has one).
// The new segment is complete and durable before it replaces the active
// one: a roll that cannot write it (a full disk) removes its files and
// changes nothing, and the next append tries again. Only a failed fsync
// is fatal to the log (l.failed). Called with l.mu held.
func (l *Log) roll(ts int64) error {
	if err := datasync.File(l.seg); err != nil {
		l.failed = fmt.Errorf("streamlog: sync %s before roll: %w", l.dir, err)
		return l.failed
	}
	base := l.written.next
	ns := &segment{base: base, size: FileHeaderSize}
	seg, idx, err := l.createSegment(base)
	if err != nil {
		l.removeSegmentFiles(ns)
		return fmt.Errorf("streamlog: roll %s: %w", l.dir, err)
	}
	data := l.tbuf[:0]
	for ref, seq := range l.writers {
		data = appendTrackSeq(data, ref, base, seq)
	}
	for ref, off := range l.offsets {
		data = appendTrackOffset(data, ref, off)
	}
	l.tbuf = data
	buf := buildTracking(l.wbuf[:0], ChunkTrackingSnapshot, data, base, ts, l.opts.Epoch)
	l.wbuf = buf[:0]
	l.opts.Disk.Reserve(int64(len(buf)))
	if _, err := seg.Write(buf); err != nil {
		seg.Close()
		idx.Close()
		l.removeSegmentFiles(ns)
		l.opts.Disk.NoSpace(err)
		return fmt.Errorf("streamlog: write tracking snapshot in %s: %w", l.dir, err)
	}
	// Retention may remove the segments holding the tracking state below:
	// make its copy durable first.
	if err := datasync.File(seg); err != nil {
		seg.Close()
		idx.Close()
		l.failed = fmt.Errorf("streamlog: sync tracking snapshot in %s: %w", l.dir, err)
		return l.failed
	}
	if err := syncDir(l.dir); err != nil {
		seg.Close()
		idx.Close()
		l.failed = fmt.Errorf("streamlog: sync directory %s: %w", l.dir, err)
		return l.failed
	}
	l.rolled = append(l.rolled, rolledFiles{seg: l.seg, idx: l.idx, idxBuf: l.pendIdx})
	l.pendIdx = nil
	l.seg, l.idx = seg, idx
	l.dirDirty = true
	l.segs = append(l.segs, ns)
	l.addIndex(indexRecord{ChunkID: base, Timestamp: ts, Epoch: l.opts.Epoch, Pos: FileHeaderSize, Type: ChunkTrackingSnapshot})
	ns.size += int64(len(buf))
	ns.chunks, ns.firstTS, ns.lastTS, ns.snapshot = 1, ts, ts, true
	w := l.written
	w.seg, w.end, w.last, w.next = ns, ns.size, int64(base), base
	l.written = w
	l.retain(ts)
	return nil
}

// removeSegmentFiles removes the files of a segment that never became part
// of the log.
func (l *Log) removeSegmentFiles(s *segment) {
	_ = os.Remove(s.segPath(l.dir))
	_ = os.Remove(s.idxPath(l.dir))
}

// ApplyRetention removes the segments that retention (MaxBytes, MaxAge)
// no longer keeps. Retention also runs whenever a segment is rolled; call
// this periodically for age-based retention of a log that stopped growing.
func (l *Log) ApplyRetention() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.retain(l.opts.Now().UnixMilli())
	}
}

// retain removes whole segments, oldest first, never the active one.
// Called with l.mu held.
func (l *Log) retain(nowMs int64) {
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	for len(l.segs) > 1 {
		s := l.segs[0]
		bySize := l.opts.MaxBytes > 0 && total > l.opts.MaxBytes
		byAge := l.opts.MaxAge > 0 && s.lastTS < nowMs-l.opts.MaxAge.Milliseconds()
		if !bySize && !byAge {
			return
		}
		// Readers that have the file open keep reading it; new readers
		// start at the next segment.
		os.Remove(s.segPath(l.dir))
		os.Remove(s.idxPath(l.dir))
		total -= s.size
		l.segs[0] = nil
		l.segs = l.segs[1:]
	}
}

// scanner reads a segment's chunks sequentially.
type scanner struct {
	r    *bufio.Reader
	pos  int64
	size int64 // file size
	buf  []byte
	next uint64 // expected chunk id
}

func newScanner(f *os.File, base uint64) (*scanner, error) {
	var hdr [FileHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("%w: segment header: %v", ErrCorrupt, err)
	}
	if !bytes.Equal(hdr[:4], segmentMagic[:]) {
		return nil, fmt.Errorf("%w: bad segment magic", ErrCorrupt)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return &scanner{
		r:    bufio.NewReaderSize(io.NewSectionReader(f, FileHeaderSize, 1<<62), 1<<20),
		pos:  FileHeaderSize,
		size: st.Size(),
		next: base,
	}, nil
}

// chunk returns the next whole valid chunk and its position; io.EOF at a
// clean end; ErrCorrupt (wrapped) at a torn or invalid chunk.
func (s *scanner) chunk() (Header, []byte, int64, error) {
	if cap(s.buf) < HeaderSize {
		s.buf = make([]byte, 64<<10)
	}
	b := s.buf[:HeaderSize]
	n, err := io.ReadFull(s.r, b)
	if err == io.EOF {
		return Header{}, nil, s.pos, io.EOF
	}
	if err != nil {
		return Header{}, nil, s.pos, fmt.Errorf("%w: torn header at %d (%d bytes)", ErrCorrupt, s.pos, n)
	}
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, s.pos, fmt.Errorf("at %d: %w", s.pos, err)
	}
	if h.ChunkID != s.next {
		return h, nil, s.pos, fmt.Errorf("%w: chunk id %d at %d, expected %d", ErrCorrupt, h.ChunkID, s.pos, s.next)
	}
	size := h.Size()
	if s.pos+size > s.size {
		return h, nil, s.pos, fmt.Errorf("%w: chunk %d at %d overruns the file", ErrCorrupt, h.ChunkID, s.pos)
	}
	if int64(cap(s.buf)) < size {
		nb := make([]byte, size)
		copy(nb, b)
		s.buf = nb
	}
	b = s.buf[:size]
	if _, err := io.ReadFull(s.r, b[HeaderSize:]); err != nil {
		return h, nil, s.pos, fmt.Errorf("%w: torn chunk %d at %d", ErrCorrupt, h.ChunkID, s.pos)
	}
	if _, _, err := ParseChunk(b); err != nil {
		return h, nil, s.pos, fmt.Errorf("at %d: %w", s.pos, err)
	}
	pos := s.pos
	s.pos += size
	s.next = h.NextOffset()
	return h, b, pos, nil
}

// applyTracking folds the tracking of one chunk into the log's state.
func (l *Log) applyTracking(h *Header, b []byte) {
	fn := func(typ byte, ref []byte, _, val uint64) {
		switch typ {
		case trackSequence:
			l.writers[string(ref)] = val
		case trackOffset:
			l.offsets[string(ref)] = val
		}
	}
	ds := h.DataStart()
	if h.Type != ChunkUser {
		_ = walkTracking(b[ds:ds+int64(h.DataLen)], fn)
	}
	if h.TrailerLen > 0 {
		_ = walkTracking(b[ds+int64(h.DataLen):], fn)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// indexPath helpers for recovery.
func (l *Log) paths(base uint64) (string, string) {
	return filepath.Join(l.dir, segName(base)), filepath.Join(l.dir, idxName(base))
}
