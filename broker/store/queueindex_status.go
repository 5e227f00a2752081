package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// Status changes of index entries: delivered marks and acks, applied to
// the segment files in runs of consecutive sequence numbers.

// setStatus rewrites entries' status bytes in place.
func (q *QueueIndex) setStatus(seqs []uint64, status byte, ack bool) error {
	if err := q.Flush(); err != nil {
		return err
	}
	E := q.opts.segmentEntries()
	// Seqs usually come in runs within one segment (a consumer's acks): each
	// run is read with one pread, marked, and written back with one pwrite
	// per stretch of changed entries.
	for i := 0; i < len(seqs); {
		sn := seqs[i] / E
		lo, hi := seqs[i]%E, seqs[i]%E
		j := i + 1
		for j < len(seqs) && seqs[j]/E == sn {
			lo, hi = min(lo, seqs[j]%E), max(hi, seqs[j]%E)
			j++
		}
		if err := q.markRun(sn, lo, hi, seqs[i:j], status, ack, false); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// markRun sets status on seqs, all in segment sn within entries [lo, hi].
// With ack, the entries leave the queue: their message-store references
// are released and their bytes uncounted, and unless counted (AckTransient
// already did) the live counts drop.
func (q *QueueIndex) markRun(sn, lo, hi uint64, seqs []uint64, status byte, ack, counted bool) error {
	s, ok := q.segs[sn]
	if !ok {
		return nil
	}
	if err := q.files(s); err != nil {
		return err
	}
	E := q.opts.segmentEntries()
	buf := make([]byte, (hi-lo+1)*entrySize)
	got, err := s.idx.ReadAt(buf, int64(lo)*entrySize)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("store: read entries: %w", err)
	}
	buf = buf[:got-got%entrySize]
	changed := make([]bool, len(buf)/entrySize)
	for _, seq := range seqs {
		k := int(seq%E - lo)
		if k >= len(changed) {
			continue
		}
		e := buf[k*entrySize : (k+1)*entrySize]
		if e[0] != statusPublished && e[0] != statusDelivered {
			continue
		}
		e[0] = status
		changed[k] = true
		if !ack {
			continue
		}
		if e[1]&flagExternal != 0 {
			q.vs.msgs.Release(MsgID(binary.BigEndian.Uint64(e[16:])))
		}
		if !counted {
			s.live--
			q.live--
		}
		q.bytes -= int64(binary.BigEndian.Uint32(e[28:]))
	}
	for k := 0; k < len(changed); {
		if !changed[k] {
			k++
			continue
		}
		m := k
		for m < len(changed) && changed[m] {
			m++
		}
		if _, err := s.idx.WriteAt(buf[k*entrySize:m*entrySize], int64(lo)*entrySize+int64(k*entrySize)); err != nil {
			return fmt.Errorf("store: mark entries: %w", err)
		}
		s.dirty = true
		k = m
	}
	// The segment being appended to stays, so a drained queue does not
	// create and delete files for every batch.
	if ack && s.live == 0 && (s.num+1)*E <= q.next {
		// Pending transient acks release their references first.
		if err := q.applyAcks(s); err != nil {
			return err
		}
		if _, ok := q.segs[sn]; ok {
			q.dropSegment(s)
		}
	}
	return nil
}

// AckTransient removes entries the caller appended with Persistent false.
// Recovery drops transient entries whatever their status, so their acks
// need no write of their own: they are counted at once and their status is
// written in one batch later (when the segment has many, before anything
// reads the segment's statuses, at Close), or never, when the whole
// segment goes. Version 1 acks them as Ack does.
func (q *QueueIndex) AckTransient(seqs []uint64) error {
	if q.journal != nil {
		return q.Ack(seqs)
	}
	E := q.opts.segmentEntries()
	for _, seq := range seqs {
		s, ok := q.segs[seq/E]
		if !ok {
			continue
		}
		s.pendAcks = append(s.pendAcks, seq)
		s.live--
		q.live--
		if len(s.pendAcks) >= maxPendingAcks || s.live == 0 && (s.num+1)*E <= q.next {
			if err := q.applyAcks(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyAcks writes a segment's pending transient acks (and releases their
// message-store references); a segment left with no live entry goes.
func (q *QueueIndex) applyAcks(s *segment) error {
	if len(s.pendAcks) == 0 {
		return nil
	}
	if err := q.flushSegment(s); err != nil {
		return err
	}
	seqs := s.pendAcks
	s.pendAcks = nil
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	E := q.opts.segmentEntries()
	return q.markRun(s.num, seqs[0]%E, seqs[len(seqs)-1]%E, seqs, statusAcked, true, true)
}

// applyAllAcks writes every segment's pending transient acks.
func (q *QueueIndex) applyAllAcks() error {
	for _, s := range q.segs {
		if err := q.applyAcks(s); err != nil {
			return err
		}
	}
	return nil
}

// Ack removes entries.
func (q *QueueIndex) Ack(seqs []uint64) error {
	if q.journal != nil {
		return q.journalMark(seqs, jrecAck)
	}
	return q.setStatus(seqs, statusAcked, true)
}

// MarkDelivered records that entries were handed to a consumer, so recovery
// after a clean shutdown sets their redelivered flag.
func (q *QueueIndex) MarkDelivered(seqs []uint64) error {
	if q.journal != nil {
		return q.journalMark(seqs, jrecDelivered)
	}
	return q.setStatus(seqs, statusDelivered, false)
}
