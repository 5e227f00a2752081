package streamlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/warrenmq/warren/broker/datasync"
)

// recover loads the segments of l.dir (see Open).
func (l *Log) recover() error {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".segment")
		if !ok || len(name) != 20 {
			continue
		}
		b, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	if len(bases) == 0 {
		seg, idx, err := l.createSegment(0)
		if err != nil {
			return err
		}
		l.seg, l.idx = seg, idx
		s := &segment{base: 0, size: FileHeaderSize}
		l.segs = []*segment{s}
		l.written = point{seg: s, end: FileHeaderSize, last: -1, lastUsr: -1}
		l.commit = l.written
		return syncDir(l.dir)
	}
	// A crash right after a roll leaves an empty last segment: drop it,
	// the previous one becomes active again.
	for len(bases) > 1 {
		sp, ip := l.paths(bases[len(bases)-1])
		st, err := os.Stat(sp)
		if err != nil || st.Size() > FileHeaderSize {
			break
		}
		l.opts.Log.Warn("stream: removed an empty segment left by a crash during a roll", "file", sp)
		os.Remove(sp)
		os.Remove(ip)
		bases = bases[:len(bases)-1]
	}
	l.segs = make([]*segment, 0, len(bases))
	for i, b := range bases[:len(bases)-1] {
		s, err := l.loadSealed(b, bases[i+1])
		if err != nil {
			return fmt.Errorf("segment %d: %w", b, err)
		}
		l.segs = append(l.segs, s)
	}
	// Tracking state: from the newest segment that opens with a snapshot
	// (or the first) up to the last one; every rolled segment opens with
	// one, so this reads the active segment, or it and the one before.
	start := 0
	for i, s := range l.segs {
		if s.snapshot {
			start = i
		}
	}
	if l.opensWithSnapshot(bases[len(bases)-1]) {
		start = len(l.segs)
	}
	for _, s := range l.segs[start:] {
		if err := l.scanTracking(s); err != nil {
			return fmt.Errorf("segment %d: %w", s.base, err)
		}
	}
	last, err := l.recoverActive(bases[len(bases)-1])
	if err != nil {
		return fmt.Errorf("segment %d: %w", bases[len(bases)-1], err)
	}
	l.segs = append(l.segs, last)
	if l.written.lastUsr < 0 {
		for i := len(l.segs) - 2; i >= 0 && l.written.lastUsr < 0; i-- {
			id, err := l.lastUserChunk(l.segs[i])
			if err != nil {
				return err
			}
			l.written.lastUsr = id
		}
	}
	l.commit = l.written
	return nil
}

// loadSealed loads a rolled segment's figures from its index, rebuilding
// the index by a scan if it does not match the segment.
func (l *Log) loadSealed(base, nextBase uint64) (*segment, error) {
	sp, ip := l.paths(base)
	f, err := os.Open(sp)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	s := &segment{base: base, size: st.Size()}
	if ok := l.checkIndex(s, f, ip, nextBase); ok {
		return s, nil
	}
	// Rebuild the index from the segment.
	sc, err := newScanner(f, base)
	if err != nil {
		return nil, err
	}
	end, err := l.rebuildIndex(s, sc, ip, nil)
	if err != nil {
		return nil, err
	}
	if end != s.size {
		// Not the log's tail: a sealed segment was fsynced before the next
		// one started, so this is damage on disk. Keep the valid prefix.
		l.opts.Log.Warn("stream: cut a corrupt sealed segment after its last valid chunk",
			"file", sp, "offset", end, "bytes_dropped", s.size-end, "chunks_kept", s.chunks)
		if err := os.Truncate(sp, end); err != nil {
			return nil, err
		}
		s.size = end
	} else {
		l.opts.Log.Warn("stream: rebuilt a segment index that did not match its segment", "file", ip, "chunks", s.chunks)
	}
	return s, nil
}

// checkIndex reads a sealed segment's figures from its index if the index
// is consistent with the segment (its last record points at the last
// chunk, which ends the file and leads to nextBase).
func (l *Log) checkIndex(s *segment, f *os.File, ip string, nextBase uint64) bool {
	x, err := os.Open(ip)
	if err != nil {
		return false
	}
	defer x.Close()
	st, err := x.Stat()
	if err != nil || st.Size() < FileHeaderSize+IndexRecordSize || (st.Size()-FileHeaderSize)%IndexRecordSize != 0 {
		return false
	}
	var b [FileHeaderSize + IndexRecordSize]byte
	if _, err := x.ReadAt(b[:], 0); err != nil || !bytes.Equal(b[:4], indexMagic[:]) {
		return false
	}
	first := parseIndexRecord(b[FileHeaderSize:])
	n := (st.Size() - FileHeaderSize) / IndexRecordSize
	if _, err := x.ReadAt(b[:IndexRecordSize], FileHeaderSize+(n-1)*IndexRecordSize); err != nil {
		return false
	}
	last := parseIndexRecord(b[:IndexRecordSize])
	var hb [HeaderSize]byte
	if _, err := f.ReadAt(hb[:], int64(last.Pos)); err != nil {
		return false
	}
	h, err := ParseHeader(hb[:])
	if err != nil || h.ChunkID != last.ChunkID || int64(last.Pos)+h.Size() != s.size || h.NextOffset() != nextBase || first.ChunkID != s.base {
		return false
	}
	s.chunks = int(n)
	s.firstTS, s.lastTS = first.Timestamp, last.Timestamp
	s.snapshot = first.Type == ChunkTrackingSnapshot
	return true
}

// rebuildIndex scans a segment and rewrites its index; it returns the end
// of the last valid chunk. fn, if not nil, sees every valid chunk.
func (l *Log) rebuildIndex(s *segment, sc *scanner, ip string, fn func(h *Header, b []byte, pos int64)) (int64, error) {
	x, err := os.OpenFile(ip, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer x.Close()
	w := bufio.NewWriterSize(x, 256<<10)
	w.Write(fileHeader(indexMagic))
	var rec [IndexRecordSize]byte
	s.chunks = 0
	for {
		h, b, pos, err := sc.chunk()
		if errors.Is(err, io.EOF) || errors.Is(err, ErrCorrupt) {
			break
		}
		if err != nil {
			return 0, err
		}
		r := indexRecord{ChunkID: h.ChunkID, Timestamp: h.Timestamp, Epoch: h.Epoch, Pos: uint32(pos), Type: h.Type}
		r.put(rec[:])
		w.Write(rec[:])
		if s.chunks == 0 {
			s.firstTS = h.Timestamp
			s.snapshot = h.Type == ChunkTrackingSnapshot
		}
		s.lastTS = h.Timestamp
		s.chunks++
		if fn != nil {
			fn(&h, b, pos)
		}
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if err := datasync.File(x); err != nil {
		return 0, err
	}
	return sc.pos, nil
}

// recoverActive validates the last segment chunk by chunk, cuts a torn or
// corrupt tail, rebuilds its index, folds its tracking into the state and
// opens it for appending.
func (l *Log) recoverActive(base uint64) (*segment, error) {
	sp, ip := l.paths(base)
	f, err := os.OpenFile(sp, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Size() < FileHeaderSize {
		// Torn while being created: write the header again.
		l.opts.Log.Warn("stream: rewrote the header of a segment torn while being created", "file", sp, "bytes_dropped", st.Size())
		err := f.Truncate(0)
		if err == nil {
			_, err = f.WriteAt(fileHeader(segmentMagic), 0)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	sc, err := newScanner(f, base)
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &segment{base: base}
	w := point{seg: s, last: -1, lastUsr: -1, next: base}
	end, err := l.rebuildIndex(s, sc, ip, func(h *Header, b []byte, pos int64) {
		if h.Type == ChunkTrackingSnapshot {
			clear(l.writers)
			clear(l.offsets)
		}
		if h.Type != ChunkUser || h.TrailerLen > 0 {
			l.applyTracking(h, b)
		}
		w.last, w.next = int64(h.ChunkID), h.NextOffset()
		if h.Type == ChunkUser {
			w.lastUsr = int64(h.ChunkID)
		}
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	if end != st.Size() && st.Size() >= FileHeaderSize {
		l.opts.Log.Warn("stream: cut a torn or corrupt tail of the active segment after its last valid chunk",
			"file", sp, "offset", end, "bytes_dropped", st.Size()-end, "chunks_kept", s.chunks)
	}
	if end != st.Size() {
		if err := f.Truncate(end); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := datasync.File(f); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(end, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	x, err := os.OpenFile(ip, os.O_RDWR, 0)
	if err != nil {
		f.Close()
		return nil, err
	}
	if _, err := x.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		x.Close()
		return nil, err
	}
	s.size = end
	w.end = end
	l.seg, l.idx = f, x
	l.written = w
	l.lastTS = s.lastTS
	return s, syncDir(l.dir)
}

// scanTracking folds the tracking records of a whole segment into the
// state.
func (l *Log) scanTracking(s *segment) error {
	l.trackingScans++
	sp, _ := l.paths(s.base)
	f, err := os.Open(sp)
	if err != nil {
		return err
	}
	defer f.Close()
	sc, err := newScanner(f, s.base)
	if err != nil {
		return err
	}
	for {
		h, b, _, err := sc.chunk()
		if errors.Is(err, io.EOF) || errors.Is(err, ErrCorrupt) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Type == ChunkTrackingSnapshot {
			clear(l.writers)
			clear(l.offsets)
		}
		if h.Type != ChunkUser || h.TrailerLen > 0 {
			l.applyTracking(&h, b)
		}
	}
}

// opensWithSnapshot reports whether a segment's first chunk is a valid
// tracking snapshot.
func (l *Log) opensWithSnapshot(base uint64) bool {
	sp, _ := l.paths(base)
	f, err := os.Open(sp)
	if err != nil {
		return false
	}
	defer f.Close()
	sc, err := newScanner(f, base)
	if err != nil {
		return false
	}
	h, _, _, err := sc.chunk()
	return err == nil && h.Type == ChunkTrackingSnapshot
}

// lastUserChunk returns the id of the last user chunk of a sealed segment
// (-1 if none), from its index.
func (l *Log) lastUserChunk(s *segment) (int64, error) {
	_, ip := l.paths(s.base)
	x, err := os.Open(ip)
	if err != nil {
		return -1, err
	}
	defer x.Close()
	var b [IndexRecordSize]byte
	for i := s.chunks - 1; i >= 0; i-- {
		if _, err := x.ReadAt(b[:], FileHeaderSize+int64(i)*IndexRecordSize); err != nil {
			return -1, err
		}
		if r := parseIndexRecord(b[:]); r.Type == ChunkUser {
			return int64(r.ChunkID), nil
		}
	}
	return -1, nil
}
