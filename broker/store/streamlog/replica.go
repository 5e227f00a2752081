package streamlog

import (
	"fmt"
)

// AppendChunks appends whole chunks exactly as they are, as a replica
// applies what a leader's Append built (so replicas hold the same chunks:
// same ids, timestamps, CRCs). raw holds one or more stored chunks back to
// back; each is validated (ParseChunk) and the first must start at the
// log's next offset. Tracking snapshots in raw are skipped (every log
// writes its own when it rolls); the tracking they carry is applied, so
// PublisherSequence and QueryOffset follow the leader. done is called
// once all of them are durable. It returns the id of the first chunk
// appended.
func (l *Log) AppendChunks(raw []byte, done DoneFunc) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if l.failed != nil {
		return 0, l.failed
	}
	// Validate everything before writing anything.
	next := l.written.next
	type span struct {
		h    Header
		b    []byte
		skip bool
	}
	var spans []span
	for p := 0; p < len(raw); {
		h, n, err := ParseChunk(raw[p:])
		if err != nil {
			return 0, fmt.Errorf("streamlog: append chunks at %d: %w", p, err)
		}
		if h.ChunkID != next {
			return 0, fmt.Errorf("%w: chunk %d where offset %d is next", ErrCorrupt, h.ChunkID, next)
		}
		if h.Timestamp < l.lastTS {
			return 0, fmt.Errorf("%w: chunk %d goes back in time", ErrCorrupt, h.ChunkID)
		}
		spans = append(spans, span{h: h, b: raw[p : p+n], skip: h.Type == ChunkTrackingSnapshot})
		next = h.NextOffset()
		p += n
	}
	if len(spans) == 0 {
		return 0, ErrEmptyBatch
	}
	first := spans[0].h.ChunkID
	w := l.written
	for _, sp := range spans {
		h := &sp.h
		if sp.skip {
			l.applyTracking(h, sp.b)
			continue
		}
		cur := l.segs[len(l.segs)-1]
		onlySnapshot := cur.snapshot && cur.chunks == 1
		if cur.chunks > 0 && !onlySnapshot && (cur.size+int64(len(sp.b)) > l.opts.MaxSegmentBytes || cur.chunks+1 > l.opts.MaxSegmentChunks) {
			l.written = w
			if err := l.roll(h.Timestamp); err != nil {
				return 0, err
			}
			w = l.written
			cur = l.segs[len(l.segs)-1]
		}
		pos := cur.size
		if _, err := l.seg.Write(sp.b); err != nil {
			if terr := l.seg.Truncate(pos); terr != nil {
				l.failed = fmt.Errorf("streamlog: append chunks to %s: %w (and truncate: %v)", l.dir, err, terr)
			} else if _, serr := l.seg.Seek(pos, 0); serr != nil {
				l.failed = fmt.Errorf("streamlog: append chunks to %s: %w (and seek: %v)", l.dir, err, serr)
			}
			l.written = w
			return 0, fmt.Errorf("streamlog: append chunks to %s: %w", l.dir, err)
		}
		l.addIndex(indexRecord{ChunkID: h.ChunkID, Timestamp: h.Timestamp, Epoch: h.Epoch, Pos: uint32(pos), Type: h.Type})
		cur.size += int64(len(sp.b))
		if cur.chunks == 0 {
			cur.firstTS = h.Timestamp
		}
		cur.chunks++
		cur.lastTS = h.Timestamp
		l.lastTS = h.Timestamp
		w.seg, w.end, w.last, w.next = cur, cur.size, int64(h.ChunkID), h.NextOffset()
		if h.Type == ChunkUser {
			w.lastUsr = int64(h.ChunkID)
		}
		if h.Type != ChunkUser || h.TrailerLen > 0 {
			l.applyTracking(h, sp.b)
		}
	}
	l.written = w
	l.pend = append(l.pend, pending{upto: w, done: done, id: first})
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return first, nil
}
