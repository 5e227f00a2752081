package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Reading a queue index: entries in sequence order from the segments, with
// their bodies from the segment or from the vhost's message store.

// Read calls fn for up to max live entries (and about maxBytes) with Seq >= from,
// in order, and returns the seq to continue from.
func (q *QueueIndex) Read(from uint64, max, maxBytes int, fn func(Entry)) (uint64, error) {
	if q.journal == nil {
		return q.readSegments(from, max, maxBytes, fn)
	}
	// Every journal entry is newer than every segment entry: segments first.
	n, bytes := 0, 0
	next, err := q.readSegments(from, max, maxBytes, func(e Entry) {
		n++
		bytes += len(e.Data)
		fn(e)
	})
	if err != nil || n >= max || (maxBytes > 0 && bytes >= maxBytes) {
		return next, err
	}
	return q.readJournal(next, max-n, maxBytes-bytes, maxBytes > 0, fn)
}

func (q *QueueIndex) readSegments(from uint64, max, maxBytes int, fn func(Entry)) (uint64, error) {
	if err := q.Flush(); err != nil {
		return from, err
	}
	E := q.opts.segmentEntries()
	n, bytes := 0, 0
	next := from
	// Segments from the one holding from up to the tail, in order (no
	// sort of a long queue's thousands of segments per read).
	for sn := from / E; q.next > 0 && sn <= (q.next-1)/E; sn++ {
		s, ok := q.segs[sn]
		if !ok {
			continue
		}
		if err := q.applyAcks(s); err != nil {
			return next, err
		}
		if _, ok := q.segs[sn]; !ok {
			continue // every entry was acked: the segment went
		}
		if err := q.files(s); err != nil {
			return next, err
		}
		start := uint64(0)
		if sn*E < from {
			start = from - sn*E
		}
		idxBuf := q.vs.getBuf(int((E - start) * entrySize))
		buf := *idxBuf
		got, err := s.idx.ReadAt(buf, int64(start)*entrySize)
		if err != nil && !errors.Is(err, io.EOF) {
			return next, fmt.Errorf("store: read entries: %w", err)
		}
		buf = buf[:got-got%entrySize]
		// First the entries to return, then their embedded bodies, which
		// lie in order in the body file, with one pread.
		type pick struct {
			en       Entry
			off      int64
			size     uint32
			external bool
		}
		var picks []pick
		var spanLo, spanHi int64 = -1, -1
		full := false
		for i := 0; i+entrySize <= len(buf); i += entrySize {
			if n >= max || (maxBytes > 0 && bytes >= maxBytes) {
				full = true
				break
			}
			e := buf[i : i+entrySize]
			seq := sn*E + start + uint64(i/entrySize)
			next = seq + 1
			if e[0] != statusPublished && e[0] != statusDelivered {
				continue
			}
			p := pick{
				en:       Entry{Seq: seq, ID: MsgID(binary.BigEndian.Uint64(e[16:])), Persistent: e[1]&flagPersistent != 0, Redelivered: e[0] == statusDelivered},
				off:      int64(binary.BigEndian.Uint32(e[24:])),
				size:     binary.BigEndian.Uint32(e[28:]),
				external: e[1]&flagExternal != 0,
			}
			if !p.external {
				if spanLo < 0 || p.off < spanLo {
					spanLo = p.off
				}
				if end := p.off + int64(p.size); end > spanHi {
					spanHi = end
				}
			}
			picks = append(picks, p)
			n++
			bytes += int(p.size)
		}
		q.vs.putBuf(idxBuf) // picks hold no reference into it
		var span []byte
		var bodyBuf *[]byte
		if spanLo >= 0 && spanHi-spanLo <= maxBodySpan {
			bodyBuf = q.vs.getBuf(int(spanHi - spanLo))
			span = *bodyBuf
			if _, err := s.body.ReadAt(span, spanLo); err != nil {
				return next, fmt.Errorf("store: read bodies: %w", err)
			}
		}
		for _, p := range picks {
			switch {
			case p.external:
				data, err := q.vs.msgs.Read(p.en.ID)
				if err != nil {
					return next, err
				}
				p.en.Data = data
			case span != nil:
				p.en.Data = append([]byte(nil), span[p.off-spanLo:p.off-spanLo+int64(p.size)]...)
			default:
				p.en.Data = make([]byte, p.size)
				if _, err := s.body.ReadAt(p.en.Data, p.off); err != nil {
					return next, fmt.Errorf("store: read body of %d: %w", p.en.Seq, err)
				}
			}
			fn(p.en)
		}
		if bodyBuf != nil {
			q.vs.putBuf(bodyBuf) // every body was copied out of it
		}
		if full {
			return next, nil
		}
	}
	return next, nil
}
