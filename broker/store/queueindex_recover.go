package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Recovery of a queue index when it is opened: segments are scanned, torn
// or corrupt entries (CRC) and transient messages are dropped, and the
// next sequence number is placed past every segment file that exists.

func (q *QueueIndex) segmentNums() ([]uint64, error) {
	entries, err := os.ReadDir(q.dir)
	if err != nil {
		return nil, fmt.Errorf("store: list queue dir: %w", err)
	}
	var nums []uint64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".qi") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".qi"), 10, 64)
		if err == nil {
			nums = append(nums, n)
		}
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	return nums, nil
}

func (q *QueueIndex) recover() (Recovery, error) {
	markerPath := filepath.Join(q.dir, cleanMarker)
	_, err := os.Stat(markerPath)
	rec := Recovery{Clean: err == nil}
	if rec.Clean {
		if err := os.Remove(markerPath); err != nil {
			return rec, fmt.Errorf("store: remove clean marker: %w", err)
		}
		syncDir(q.dir)
	}
	nums, err := q.segmentNums()
	if err != nil {
		return rec, err
	}
	E := q.opts.segmentEntries()
	for _, n := range nums {
		s, err := q.openSegment(n)
		if err != nil {
			return rec, err
		}
		buf := make([]byte, E*entrySize)
		got, err := s.idx.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return rec, fmt.Errorf("store: read segment: %w", err)
		}
		if got%entrySize != 0 {
			q.log().Warn("queue index: ignored a torn entry at the end of a segment", "file", q.segPath(n, "qi"), "bytes", got%entrySize)
		}
		buf = buf[:got-got%entrySize]
		var dropped [dropReasons]int
		for i := 0; i+entrySize <= len(buf); i += entrySize {
			e := buf[i : i+entrySize]
			st := e[0]
			if st > statusDelivered {
				// The status byte is outside the CRC (acks rewrite it in
				// place): a value no writer makes is damage.
				dropped[dropCorrupt]++
				continue
			}
			if st != statusPublished && st != statusDelivered {
				continue
			}
			seq := binary.BigEndian.Uint64(e[8:])
			why := dropNone
			switch {
			case e[1]&flagPersistent == 0:
				why = dropTransient
			case seq != n*E+uint64(i/entrySize):
				why = dropCorrupt
			default:
				why = q.entryValid(s, e)
			}
			if why != dropNone {
				// Transient, torn or corrupt: never served again.
				dropped[why]++
				if _, err := s.idx.WriteAt([]byte{statusEmpty}, int64(i)); err != nil {
					return rec, fmt.Errorf("store: drop entry: %w", err)
				}
				s.dirty = true
				continue
			}
			s.live++
			q.live++
			q.bytes += int64(binary.BigEndian.Uint32(e[28:]))
			rec.Count++
			rec.Bytes += int64(binary.BigEndian.Uint32(e[28:]))
			if seq+1 > rec.Next {
				rec.Next = seq + 1
			}
		}
		if dropped[dropCorrupt] > 0 {
			q.log().Warn("queue index: dropped torn or corrupt entries (CRC mismatch, impossible status); the other entries are kept",
				"file", q.segPath(n, "qi"), "entries", dropped[dropCorrupt], "kept", s.live)
		}
		if dropped[dropMissing] > 0 {
			q.log().Warn("queue index: dropped entries whose message is not in the message store",
				"file", q.segPath(n, "qi"), "entries", dropped[dropMissing], "kept", s.live)
		}
		if s.live == 0 {
			q.dropSegment(s)
		}
		q.trimOpen()
	}
	if len(nums) > 0 && rec.Next < (nums[len(nums)-1]+1)*E {
		// Never reuse a seq of a segment file that exists: start past it.
		rec.Next = (nums[len(nums)-1] + 1) * E
	}
	if q.opts.Version == 1 {
		if err := q.openJournal(&rec); err != nil {
			return rec, err
		}
	}
	q.next = rec.Next
	return rec, nil
}

// Why recovery drops an entry.
const (
	dropNone      = iota
	dropTransient // expected: transient messages do not survive a restart
	dropCorrupt   // torn or corrupt: its CRC fails
	dropMissing   // its message is not in the message store
	dropReasons
)

// entryValid checks an entry's CRC against its body and, for an external
// message, takes a message-store reference. It returns why the entry is
// dropped, or dropNone.
func (q *QueueIndex) entryValid(s *segment, e []byte) int {
	size := binary.BigEndian.Uint32(e[28:])
	var body []byte
	if e[1]&flagExternal == 0 {
		off := int64(binary.BigEndian.Uint32(e[24:]))
		if off+int64(size) > s.bodyN {
			return dropCorrupt
		}
		body = make([]byte, size)
		if _, err := s.body.ReadAt(body, off); err != nil {
			return dropCorrupt
		}
	}
	if entryCRC(e, body) != binary.BigEndian.Uint32(e[4:]) {
		return dropCorrupt
	}
	if e[1]&flagExternal != 0 {
		id := MsgID(binary.BigEndian.Uint64(e[16:]))
		ok := q.countRefs && q.vs.msgs.addRef(id) || !q.countRefs && q.vs.msgs.has(id)
		if !ok {
			return dropMissing
		}
	}
	return dropNone
}

func (q *QueueIndex) log() *slog.Logger {
	if q.vs.log == nil {
		return slog.Default()
	}
	return q.vs.log.With("queue_dir", filepath.Base(q.dir))
}

func entryCRC(e, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(e[8:32], crcTable), crcTable, body)
}
