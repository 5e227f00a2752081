package store

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Version 1 layout: RabbitMQ's classic queue index before CQv2. Publishes,
// acks and delivered marks are appended to a per-queue journal — one
// sequential write per batch — and moved into the fixed segment files of
// 16384 entries when the journal fills up (journalMaxRecords) or the queue
// closes. Recovery scans the segments, then replays the journal on top.
//
// Journal record: type(1) len(4) crc32c(4) payload. A publish's payload is
// the 32-byte entry (offset 0) followed by its embedded body; an ack's or a
// delivered mark's is a list of 8-byte seqs. A torn or corrupt record ends
// the replay; the journal is cut there.
const (
	journalName       = "journal.jif"
	journalMaxRecords = 16384
	journalMaxBytes   = 32 << 20

	jrecPublish   = 1
	jrecAck       = 2
	jrecDelivered = 3
)

// jentry is a journal entry not yet in a segment.
type jentry struct {
	e    [entrySize]byte
	body []byte
}

func (q *QueueIndex) openJournal(rec *Recovery) error {
	if err := q.settleOptions(); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(q.dir, journalName), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("store: open journal: %w", err)
	}
	q.journal = f
	q.jpend = map[uint64]*jentry{}
	good, err := q.replayJournal(rec)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil && st.Size() > good {
		q.log().Warn("queue index: cut a torn or corrupt journal tail after its last whole record",
			"file", f.Name(), "offset", good, "bytes_dropped", st.Size()-good)
	}
	if err := f.Truncate(good); err != nil {
		return fmt.Errorf("store: cut torn journal: %w", err)
	}
	q.journalN = good
	return nil
}

// replayJournal applies the journal to the recovered segments and returns
// the length of its whole records.
func (q *QueueIndex) replayJournal(rec *Recovery) (int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(q.journal, 0, 1<<62), 1<<16)
	var off int64
	type pend struct {
		je        *jentry
		delivered bool
	}
	pub := map[uint64]*pend{}
	var segAcks, segDelivered []uint64
	var hdr [9]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n > maxMessageSize+entrySize {
			break
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			break
		}
		if crc32.Checksum(payload, crcTable) != binary.BigEndian.Uint32(hdr[5:]) {
			break
		}
		off += int64(9 + n)
		q.journalRecs++
		switch hdr[0] {
		case jrecPublish:
			if n < entrySize {
				continue
			}
			je := &jentry{body: payload[entrySize:]}
			copy(je.e[:], payload[:entrySize])
			seq := binary.BigEndian.Uint64(je.e[8:])
			pub[seq] = &pend{je: je}
			// Never reuse a seq the journal has seen, even a transient one.
			if seq+1 > rec.Next {
				rec.Next = seq + 1
			}
		case jrecAck, jrecDelivered:
			for i := 0; i+8 <= len(payload); i += 8 {
				seq := binary.BigEndian.Uint64(payload[i:])
				p, ok := pub[seq]
				switch {
				case ok && hdr[0] == jrecAck:
					delete(pub, seq)
				case ok:
					p.delivered = true
				case hdr[0] == jrecAck:
					segAcks = append(segAcks, seq)
				default:
					segDelivered = append(segDelivered, seq)
				}
			}
		}
	}
	// Entries already moved to segments (a flush cut short by a crash) are
	// skipped; the rest stay pending, persistent ones only.
	E := q.opts.segmentEntries()
	for seq, p := range pub {
		if p.je.e[1]&flagPersistent == 0 {
			continue
		}
		if s, ok := q.segs[seq/E]; ok && q.files(s) == nil {
			var have [1]byte
			if _, err := s.idx.ReadAt(have[:], int64(seq%E)*entrySize); err == nil && have[0] != statusEmpty {
				continue
			}
		}
		if p.je.e[1]&flagExternal != 0 {
			id := MsgID(binary.BigEndian.Uint64(p.je.e[16:]))
			if q.countRefs && !q.vs.msgs.addRef(id) || !q.countRefs && !q.vs.msgs.has(id) {
				continue
			}
		}
		if p.delivered {
			p.je.e[0] = statusDelivered
		}
		q.jpend[seq] = p.je
		q.live++
		size := int64(binary.BigEndian.Uint32(p.je.e[28:]))
		q.bytes += size
		rec.Count++
		rec.Bytes += size
		if seq+1 > rec.Next {
			rec.Next = seq + 1
		}
	}
	if len(segAcks) > 0 {
		before := q.live
		if err := q.setStatus(segAcks, statusAcked, true); err != nil {
			return off, err
		}
		rec.Count -= before - q.live
	}
	if len(segDelivered) > 0 {
		if err := q.setStatus(segDelivered, statusDelivered, false); err != nil {
			return off, err
		}
	}
	return off, nil
}

func (q *QueueIndex) writeJournal(typ byte, payload []byte) error {
	var hdr [9]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	binary.BigEndian.PutUint32(hdr[5:], crc32.Checksum(payload, crcTable))
	rec := append(hdr[:], payload...)
	if _, err := q.journal.WriteAt(rec, q.journalN); err != nil {
		return fmt.Errorf("store: write journal: %w", err)
	}
	q.journalN += int64(len(rec))
	q.journalRecs++
	q.journalDirty = true
	return nil
}

// journalAppend writes the batch as one journal write. On error (a full
// disk) the journal is cut back and nothing of the batch stays. Moving the
// journal into the segments is not part of the batch: the batch is safe in
// the journal, and a move that fails is tried again later.
func (q *QueueIndex) journalAppend(entries []Entry) error {
	var buf []byte
	for _, en := range entries {
		e, body := q.buildEntry(en)
		binary.BigEndian.PutUint32(e[4:], entryCRC(e[:], body))
		var hdr [9]byte
		hdr[0] = jrecPublish
		payload := append(e[:], body...)
		binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
		binary.BigEndian.PutUint32(hdr[5:], crc32.Checksum(payload, crcTable))
		buf = append(buf, hdr[:]...)
		buf = append(buf, payload...)
	}
	if len(buf) == 0 {
		return nil
	}
	q.vs.disk.Reserve(int64(len(buf)))
	if _, err := q.journal.WriteAt(buf, q.journalN); err != nil {
		// No stale record of this batch may stay behind the next write.
		_ = q.journal.Truncate(q.journalN)
		return fmt.Errorf("store: write journal: %w", err)
	}
	for _, en := range entries {
		e, body := q.buildEntry(en)
		binary.BigEndian.PutUint32(e[4:], entryCRC(e[:], body))
		q.jpend[en.Seq] = &jentry{e: e, body: append([]byte(nil), body...)}
		q.live++
		q.bytes += int64(len(en.Data))
		if en.Seq >= q.next {
			q.next = en.Seq + 1
		}
	}
	q.journalN += int64(len(buf))
	q.journalRecs += len(entries)
	q.journalDirty = true
	_ = q.maybeFlushJournal()
	return nil
}

// journalMark records acks or delivered marks. Entries already in segment
// files are marked in place, as in version 2; journal entries get a journal
// record.
func (q *QueueIndex) journalMark(seqs []uint64, typ byte) error {
	payload := make([]byte, 0, 8*len(seqs))
	var inSegments []uint64
	for _, seq := range seqs {
		je, inJournal := q.jpend[seq]
		switch {
		case inJournal && typ == jrecAck:
			if je.e[1]&flagExternal != 0 {
				q.vs.msgs.Release(MsgID(binary.BigEndian.Uint64(je.e[16:])))
			}
			delete(q.jpend, seq)
			q.live--
			q.bytes -= int64(binary.BigEndian.Uint32(je.e[28:]))
		case inJournal:
			je.e[0] = statusDelivered
		default:
			inSegments = append(inSegments, seq)
			continue
		}
		payload = binary.BigEndian.AppendUint64(payload, seq)
	}
	if len(inSegments) > 0 {
		status := byte(statusAcked)
		if typ == jrecDelivered {
			status = statusDelivered
		}
		if err := q.setStatus(inSegments, status, typ == jrecAck); err != nil {
			return err
		}
	}
	if len(payload) == 0 {
		return nil
	}
	if err := q.writeJournal(typ, payload); err != nil {
		return err
	}
	return q.maybeFlushJournal()
}

func (q *QueueIndex) maybeFlushJournal() error {
	if q.journalRecs < journalMaxRecords && q.journalN < journalMaxBytes {
		return nil
	}
	return q.flushJournal()
}

// flushJournal moves pending entries and marks into the segments, makes
// them durable, then empties the journal.
func (q *QueueIndex) flushJournal() error {
	if q.journal == nil || (len(q.jpend) == 0 && q.journalN == 0) {
		return nil
	}
	seqs := make([]uint64, 0, len(q.jpend))
	for seq := range q.jpend {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, seq := range seqs {
		je := q.jpend[seq]
		// placeEntry counts the entry again: it was counted when journaled.
		n := int64(binary.BigEndian.Uint32(je.e[28:]))
		q.live--
		q.bytes -= n
		if err := q.placeEntry(je.e, je.body, nil); err != nil {
			// Not placed (a full disk): it stays a journal entry, counted
			// once. Those placed before it are the segments' now, so a
			// retry does not place them twice and their acks go to the
			// segments.
			q.live++
			q.bytes += n
			return err
		}
		delete(q.jpend, seq)
	}
	if err := q.Flush(); err != nil {
		return err
	}
	for _, s := range q.segs {
		if s.dirty {
			if err := s.idx.Sync(); err != nil {
				return fmt.Errorf("store: fsync segment: %w", err)
			}
			if err := s.body.Sync(); err != nil {
				return fmt.Errorf("store: fsync segment bodies: %w", err)
			}
		}
	}
	if err := q.journal.Truncate(0); err != nil {
		return fmt.Errorf("store: empty journal: %w", err)
	}
	if err := q.journal.Sync(); err != nil {
		return fmt.Errorf("store: fsync journal: %w", err)
	}
	q.journalN, q.journalRecs, q.journalDirty = 0, 0, false
	return nil
}

// readJournal serves pending journal entries with seq >= from, in order.
func (q *QueueIndex) readJournal(from uint64, max, maxBytes int, limitBytes bool, fn func(Entry)) (uint64, error) {
	seqs := make([]uint64, 0, len(q.jpend))
	for seq := range q.jpend {
		if seq >= from {
			seqs = append(seqs, seq)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	next, n, bytes := from, 0, 0
	for _, seq := range seqs {
		if n >= max || (limitBytes && bytes >= maxBytes) {
			break
		}
		je := q.jpend[seq]
		en := Entry{Seq: seq, ID: MsgID(binary.BigEndian.Uint64(je.e[16:])), Persistent: je.e[1]&flagPersistent != 0, Redelivered: je.e[0] == statusDelivered}
		if je.e[1]&flagExternal != 0 {
			data, err := q.vs.msgs.Read(en.ID)
			if err != nil {
				return next, err
			}
			en.Data = data
		} else {
			en.Data = append([]byte(nil), je.body...)
		}
		fn(en)
		n++
		bytes += len(en.Data)
		next = seq + 1
	}
	return next, nil
}
