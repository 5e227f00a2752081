package logstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const (
	segmentExt   = ".wlog"
	segmentMagic = "WRNRAFT1" // 8 bytes at the start of every segment
)

// ErrCorrupt is wrapped by Open's error when a segment holds a damaged
// record that is not a torn tail: Raft must not silently lose committed
// entries, so the store refuses to open and names the file and offset.
var ErrCorrupt = errors.New("logstore: corrupt segment")

// recover scans every segment in order, rebuilds the index and opens the
// head (creating the first segment of an empty store).
func (s *Store) recover(ctx context.Context) error {
	seqs, err := listSegments(s.dir)
	if err != nil {
		return err
	}
	rp := replay{}
	for i, seq := range seqs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("logstore: open %s: %w", s.dir, err)
		}
		seg, err := s.scan(seq, i == len(seqs)-1, rp)
		if err != nil {
			return err
		}
		s.segs = append(s.segs, seg)
		s.bySeq[seq] = seg
	}
	if err := rp.build(s.idx); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, s.dir, err)
	}
	if len(s.segs) == 0 {
		seg, err := s.createSegment(1)
		if err != nil {
			return err
		}
		s.segs = append(s.segs, seg)
		s.bySeq[seg.seq] = seg
	}
	return nil
}

func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("logstore: list %s: %w", dir, err)
	}
	var seqs []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), segmentExt)
		if !ok || e.IsDir() {
			continue
		}
		seq, err := strconv.ParseUint(name, 16, 64)
		if err != nil || len(name) != 16 || seq == 0 {
			return nil, fmt.Errorf("logstore: %s: unexpected segment name", filepath.Join(dir, e.Name()))
		}
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs, nil
}

// scan reads one segment, applies its records to the index and returns it
// open. In the last segment a bad record followed by at most one commit
// mark is a torn final batch: the file is cut there (logged at warn). Any
// other bad record is ErrCorrupt.
func (s *Store) scan(seq uint64, last bool, rp replay) (*segment, error) {
	path := s.segPath(seq)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("logstore: open segment: %w", err)
	}
	seg := &segment{seq: seq, path: path, f: f}
	b, err := os.ReadFile(path)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("logstore: read segment: %w", err)
	}
	if len(b) < len(segmentMagic) && last { // torn creation of the head
		s.log.Warn("logstore: rewriting a torn segment header", "file", path, "bytes", len(b))
		if err := rewriteHeader(f); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("logstore: %s: %w", path, err)
		}
		seg.size = int64(len(segmentMagic))
		return seg, nil
	}
	if len(b) < len(segmentMagic) || string(b[:len(segmentMagic)]) != segmentMagic {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s: not a segment (bad header)", ErrCorrupt, path)
	}
	off := len(segmentMagic)
	for off < len(b) {
		rec, n, err := decodeRecord(b[off:])
		if err != nil {
			if last && commitsAfter(b, off+1) <= 1 {
				s.log.Warn("logstore: cutting a torn tail", "file", path, "offset", off, "bytes", len(b)-off, "err", err)
				if err := truncateSync(f, int64(off)); err != nil {
					_ = f.Close()
					return nil, fmt.Errorf("logstore: cut %s at %d: %w", path, off, err)
				}
				break
			}
			_ = f.Close()
			return nil, fmt.Errorf("%w: %s at offset %d: %v (records follow it, so it is not a torn tail; restore this node's log from a peer)", ErrCorrupt, path, off, err)
		}
		rp.apply(s.idx, rec, loc{seg: seq, off: int64(off), n: uint32(n)})
		off += n
	}
	seg.size = int64(off)
	return seg, nil
}

// replay collects each group's entries as a set while the segments are
// read in order: a log or move record sets its index, a delete record
// removes the indexes in its range (last writer wins). The oldest segments
// may be gone (only ever a prefix, and only once everything in them was
// dead or copied forward), so moved entries can arrive below a group's
// first index and out of order; the set does not care. At the end each
// group's set must be contiguous.
type replay map[string]map[uint64]loc

func (rp replay) apply(x *index, rec record, l loc) {
	group := string(rec.group)
	switch rec.kind {
	case kindLog, kindMove:
		m := rp[group]
		if m == nil {
			m = map[uint64]loc{}
			rp[group] = m
		}
		m[rec.index] = l
	case kindDelete:
		m := rp[group]
		if rec.min > rec.max {
			return
		}
		if rec.max-rec.min >= uint64(len(m)) {
			for i := range m {
				if i >= rec.min && i <= rec.max {
					delete(m, i)
				}
			}
			return
		}
		for i := rec.min; ; i++ {
			delete(m, i)
			if i == rec.max {
				break
			}
		}
	case kindDrop:
		delete(rp, group)
		x.applyDrop(group)
	default:
		x.applyStable(group, rec.key, rec.val, l.seg)
	}
}

// build turns the sets into the index, checking each is contiguous.
func (rp replay) build(x *index) error {
	for group, m := range rp {
		if len(m) == 0 {
			continue
		}
		idx := make([]uint64, 0, len(m))
		for i := range m {
			idx = append(idx, i)
		}
		sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
		if span := idx[len(idx)-1] - idx[0] + 1; span != uint64(len(idx)) {
			return fmt.Errorf("group %q: %d entries between %d and %d, with holes", group, len(idx), idx[0], idx[len(idx)-1])
		}
		for _, i := range idx {
			if err := x.applyLog(group, i, m[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// commitsAfter counts the intact records with a commit mark that start at
// or after from (found by trying every offset, then skipping whole records).
func commitsAfter(b []byte, from int) int {
	commits := 0
	for p := from; p+headerLen+minBody <= len(b); {
		rec, n, err := decodeRecord(b[p:])
		if err != nil {
			p++
			continue
		}
		if rec.commit {
			commits++
		}
		p += n
	}
	return commits
}

func truncateSync(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

func rewriteHeader(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(segmentMagic), 0); err != nil {
		return err
	}
	return f.Sync()
}
