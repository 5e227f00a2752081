package logstore

import (
	"fmt"
	"os"

	"github.com/warrenmq/warren/broker/datasync"
)

// writer is the one goroutine that writes: it takes whatever requests are
// queued (from every group), writes them with one write and one fdatasync,
// updates the index, then answers every waiter (group commit).
func (s *Store) writer() {
	defer close(s.writerDone)
	batch := make([]*request, 0, maxBatch)
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		drain:
			for len(batch) < maxBatch {
				select {
				case r := <-s.reqs:
					batch = append(batch, r)
				default:
					break drain
				}
			}
			s.answer(batch, s.commit(batch))
			clear(batch)
			if err := s.collect(); err != nil {
				s.fail(err)
			}
		case <-s.closing:
			for {
				select {
				case r := <-s.reqs:
					s.answer([]*request{r}, ErrClosed)
				default:
					return
				}
			}
		}
	}
}

func (s *Store) answer(batch []*request, err error) {
	for _, r := range batch {
		if r.done != nil {
			r.done <- err
		}
	}
}

func (s *Store) fail(err error) {
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
	s.log.Error("logstore: writes refused from now on", "dir", s.dir, "err", err)
}

// commit writes batch to the head segment, syncs it and applies it to the
// index. After a failed write or sync the store refuses everything: what
// reached the disk is unknown, and recovery on the next open decides.
func (s *Store) commit(batch []*request) error {
	s.mu.RLock()
	failed := s.failed
	s.mu.RUnlock()
	if failed != nil {
		return failed
	}
	head := s.segs[len(s.segs)-1]
	if head.size >= s.opts.SegmentBytes {
		var err error
		if head, err = s.roll(); err != nil {
			s.fail(err)
			return err
		}
	}
	buf, locs, marks := s.buf[:0], s.locs[:0], s.marks[:0]
	for _, r := range batch {
		switch {
		case r.logs != nil:
			for _, l := range r.logs {
				at := len(buf)
				buf = appendLogRecord(buf, r.group, l)
				locs = append(locs, loc{seg: head.seq, off: head.size + int64(at), n: uint32(len(buf) - at)})
				marks = append(marks, at)
			}
		case r.moves != nil:
			for _, m := range r.moves {
				at := len(buf)
				buf = append(buf, m.raw...)
				locs = append(locs, loc{seg: head.seq, off: head.size + int64(at), n: uint32(len(m.raw))})
				marks = append(marks, at)
			}
		case r.drop:
			marks = append(marks, len(buf))
			buf = appendDropRecord(buf, r.group)
		case r.del:
			marks = append(marks, len(buf))
			buf = appendDeleteRecord(buf, r.group, r.min, r.max)
		default:
			marks = append(marks, len(buf))
			buf = appendStableRecord(buf, r.group, r.key, r.val)
		}
	}
	s.buf, s.locs, s.marks = buf, locs, marks
	if len(buf) == 0 {
		return nil
	}
	markCommit(buf, marks[len(marks)-1])
	if _, err := head.f.WriteAt(buf, head.size); err != nil {
		err = fmt.Errorf("logstore: write %s at %d: %w", head.path, head.size, err)
		s.fail(err)
		return err
	}
	if err := datasync.File(head.f); err != nil {
		err = fmt.Errorf("logstore: fdatasync %s: %w", head.path, err)
		s.fail(err)
		return err
	}
	head.size += int64(len(buf))
	s.syncs.Add(1)
	s.records.Add(uint64(len(marks)))

	s.mu.Lock()
	defer s.mu.Unlock()
	li := 0
	for _, r := range batch {
		var err error
		switch {
		case r.logs != nil:
			for _, l := range r.logs {
				if err = s.idx.applyLog(r.group, l.Index, locs[li]); err != nil {
					break
				}
				li++
			}
		case r.moves != nil:
			for _, m := range r.moves {
				if err = s.idx.applyMove(m.group, m.index, locs[li]); err != nil {
					break
				}
				li++
			}
		case r.drop:
			s.idx.applyDrop(r.group)
		case r.del:
			err = s.idx.applyDelete(r.group, r.min, r.max)
		default:
			s.idx.applyStable(r.group, r.key, r.val, head.seq)
		}
		if err != nil { // checked before queueing: a bug, not bad input
			s.failed = fmt.Errorf("logstore: index out of step with the log: %w", err)
			return s.failed
		}
	}
	return nil
}

// roll starts a new head segment. The old head was synced by its last
// commit; the new file and its directory entry are synced before use.
func (s *Store) roll() (*segment, error) {
	seg, err := s.createSegment(s.segs[len(s.segs)-1].seq + 1)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.segs = append(s.segs, seg)
	s.bySeq[seg.seq] = seg
	s.mu.Unlock()
	return seg, nil
}

func (s *Store) createSegment(seq uint64) (*segment, error) {
	path := s.segPath(seq)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("logstore: create segment: %w", err)
	}
	if _, err := f.Write([]byte(segmentMagic)); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("logstore: write %s: %w", path, err)
	}
	if err := datasync.File(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("logstore: fdatasync %s: %w", path, err)
	}
	if err := syncDir(s.dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &segment{seq: seq, path: path, f: f, size: int64(len(segmentMagic))}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("logstore: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("logstore: fsync dir %s: %w", dir, err)
	}
	return nil
}

// collect removes the oldest segments while no group has a live entry in
// them. When the live entries of the oldest take at most a quarter of it
// (say an idle group's few entries), they are first copied forward to the
// head as move records, as are the current stable values located in it.
// Only a prefix of the segment sequence is ever removed, so a delete record
// is never removed before the entries it deleted (recovery would bring
// them back).
func (s *Store) collect() error {
	for {
		s.mu.RLock()
		if len(s.segs) < 2 || s.failed != nil {
			s.mu.RUnlock()
			return nil
		}
		old := s.segs[0]
		c := s.idx.live[old.seq]
		if c != nil && c.logs > 0 && c.bytes*4 > old.size {
			s.mu.RUnlock()
			return nil // mostly live: wait until its groups compact
		}
		forward, err := s.forward(old.seq, c)
		s.mu.RUnlock()
		if err != nil {
			return err
		}
		if len(forward) > 0 {
			if err := s.commit(forward); err != nil {
				return err
			}
		}
		s.mu.Lock()
		if c := s.idx.live[old.seq]; c != nil && (c.logs > 0 || c.stable > 0) {
			s.mu.Unlock()
			return fmt.Errorf("logstore: segment %s still has %d live entries and %d stable values after moving them", old.path, c.logs, c.stable)
		}
		s.segs = s.segs[1:]
		delete(s.bySeq, old.seq)
		delete(s.idx.live, old.seq)
		s.mu.Unlock()
		_ = old.f.Close()
		if err := os.Remove(old.path); err != nil {
			// Harmless to keep: everything in it is dead or copied, and
			// recovery replays the records that made it so.
			s.log.Warn("logstore: cannot remove a segment without live entries", "file", old.path, "err", err)
			continue
		}
		s.log.Info("logstore: removed segment without live entries", "file", old.path)
	}
}

// forward returns the requests that copy what is live in segment seq (c's
// counts) to the head: its live entries as move records, its current
// stable values. Callers hold mu for reading.
func (s *Store) forward(seq uint64, c *liveCounts) ([]*request, error) {
	if c == nil {
		return nil, nil
	}
	var out []*request
	if c.logs > 0 {
		var moves []move
		for id, g := range s.idx.groups {
			for i, l := range g.locs {
				if l.seg != seq {
					continue
				}
				raw, err := s.readAt(l)
				if err != nil {
					return nil, err
				}
				if _, _, err := decodeRecord(raw); err != nil {
					return nil, fmt.Errorf("logstore: moving group %q index %d: %w", id, g.first+uint64(i), err)
				}
				asMove(raw)
				moves = append(moves, move{group: id, index: g.first + uint64(i), raw: raw})
			}
		}
		out = append(out, &request{moves: moves})
	}
	if c.stable > 0 {
		for id, g := range s.idx.groups {
			for k, v := range g.stable {
				if v.seg == seq {
					out = append(out, &request{group: id, key: []byte(k), val: v.val})
				}
			}
		}
	}
	return out, nil
}
