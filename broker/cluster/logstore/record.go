package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// Record kinds.
const (
	kindLog    byte = 1 // one raft.Log of a group
	kindDelete byte = 2 // DeleteRange(min, max) of a group
	kindStable byte = 3 // StableStore Set of a group: key and value
	kindMove   byte = 4 // a live log entry copied forward out of the oldest segment (body as kindLog)
	kindDrop   byte = 5 // the group is gone: its entries and stable values
	// flagCommit marks the last record of one write (a batch): recovery
	// tells a torn final batch from damage to an earlier, acknowledged one
	// by the commit marks that follow a bad record.
	flagCommit byte = 0x80
)

const (
	headerLen  = 8         // [len u32][crc32c u32]
	minBody    = 1 + 2 + 1 // kind, group length, a group id of at least one byte
	maxGroupID = 1<<16 - 1
	// MaxRecordBytes bounds one record (a raft entry's data and extensions
	// with their header); a length above it is corruption, never an
	// allocation.
	MaxRecordBytes = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errBadRecord = errors.New("logstore: malformed record")

// record is one decoded record. Its byte slices alias the buffer it was
// decoded from.
type record struct {
	kind     byte
	commit   bool // the last record of its batch
	group    []byte
	index    uint64 // kindLog, kindMove
	term     uint64
	typ      raft.LogType
	at       int64 // AppendedAt, Unix nanoseconds; 0 for the zero time
	data     []byte
	ext      []byte
	min, max uint64 // kindDelete
	key, val []byte // kindStable
}

// appendHeader reserves a record header at the end of buf and returns buf
// and the header's position; finishRecord fills it once the body is written.
func appendHeader(buf []byte) ([]byte, int) {
	return append(buf, make([]byte, headerLen)...), len(buf)
}

func finishRecord(buf []byte, at int) {
	body := buf[at+headerLen:]
	binary.LittleEndian.PutUint32(buf[at:], uint32(len(body)))
	binary.LittleEndian.PutUint32(buf[at+4:], crc32.Checksum(body, castagnoli))
}

func appendBodyStart(buf []byte, kind byte, group string) []byte {
	buf = append(buf, kind)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(group)))
	return append(buf, group...)
}

// appendLogRecord appends a kindLog record for l of group to buf.
func appendLogRecord(buf []byte, group string, l *raft.Log) []byte {
	buf, at := appendHeader(buf)
	buf = appendBodyStart(buf, kindLog, group)
	buf = binary.LittleEndian.AppendUint64(buf, l.Index)
	buf = binary.LittleEndian.AppendUint64(buf, l.Term)
	buf = append(buf, byte(l.Type))
	var ns int64
	if !l.AppendedAt.IsZero() {
		ns = l.AppendedAt.UnixNano()
	}
	buf = binary.LittleEndian.AppendUint64(buf, uint64(ns))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(l.Data)))
	buf = append(buf, l.Data...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(l.Extensions)))
	buf = append(buf, l.Extensions...)
	finishRecord(buf, at)
	return buf
}

func appendDeleteRecord(buf []byte, group string, min, max uint64) []byte {
	buf, at := appendHeader(buf)
	buf = appendBodyStart(buf, kindDelete, group)
	buf = binary.LittleEndian.AppendUint64(buf, min)
	buf = binary.LittleEndian.AppendUint64(buf, max)
	finishRecord(buf, at)
	return buf
}

func appendDropRecord(buf []byte, group string) []byte {
	buf, at := appendHeader(buf)
	buf = appendBodyStart(buf, kindDrop, group)
	finishRecord(buf, at)
	return buf
}

func appendStableRecord(buf []byte, group string, key, val []byte) []byte {
	buf, at := appendHeader(buf)
	buf = appendBodyStart(buf, kindStable, group)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(key)))
	buf = append(buf, key...)
	buf = append(buf, val...)
	finishRecord(buf, at)
	return buf
}

// recordLen reads a record header at the start of b and returns the whole
// record's length (header included). It reports errBadRecord for a length
// that cannot be a record and io-style short input as ok=false.
func recordLen(b []byte) (n int, ok bool, err error) {
	if len(b) < headerLen {
		return 0, false, nil
	}
	body := binary.LittleEndian.Uint32(b)
	if body < minBody || body > MaxRecordBytes {
		return 0, true, fmt.Errorf("%w: body length %d", errBadRecord, body)
	}
	return headerLen + int(body), true, nil
}

// decodeRecord decodes the record at the start of b: it checks the length
// and the CRC, then the body's fields. It never panics and never allocates
// more than the record's fields.
func decodeRecord(b []byte) (record, int, error) {
	n, ok, err := recordLen(b)
	if err != nil {
		return record{}, 0, err
	}
	if !ok || n > len(b) {
		return record{}, 0, fmt.Errorf("%w: truncated (%d of %d bytes)", errBadRecord, len(b), max(n, headerLen))
	}
	body := b[headerLen:n]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(b[4:]); got != want {
		return record{}, 0, fmt.Errorf("%w: crc32c %08x, header says %08x", errBadRecord, got, want)
	}
	r, err := decodeBody(body)
	return r, n, err
}

// reader walks a record body; a read past its end sets bad.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() byte {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u16() int {
	if v := r.take(2); v != nil {
		return int(binary.LittleEndian.Uint16(v))
	}
	return 0
}

func (r *reader) u32() int {
	if v := r.take(4); v != nil {
		return int(binary.LittleEndian.Uint32(v))
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func decodeBody(body []byte) (record, error) {
	r := reader{b: body}
	k := r.u8()
	rec := record{kind: k &^ flagCommit, commit: k&flagCommit != 0}
	rec.group = r.take(r.u16())
	if len(rec.group) == 0 {
		return record{}, fmt.Errorf("%w: empty group id", errBadRecord)
	}
	switch rec.kind {
	case kindLog, kindMove:
		rec.index, rec.term = r.u64(), r.u64()
		rec.typ = raft.LogType(r.u8())
		rec.at = int64(r.u64())
		rec.data = r.take(r.u32())
		rec.ext = r.take(r.u32())
	case kindDelete:
		rec.min, rec.max = r.u64(), r.u64()
	case kindDrop:
	case kindStable:
		rec.key = r.take(r.u16())
		rec.val = r.b
		r.b = nil
	default:
		return record{}, fmt.Errorf("%w: unknown kind %d", errBadRecord, rec.kind)
	}
	if r.bad || len(r.b) != 0 {
		return record{}, fmt.Errorf("%w: kind %d body of %d bytes does not match its fields", errBadRecord, rec.kind, len(body))
	}
	return rec, nil
}

// markCommit sets the commit flag on the record that starts at buf[at:]
// (the last of a batch) and recomputes its CRC.
func markCommit(buf []byte, at int) {
	buf[at+headerLen] |= flagCommit
	finishRecord(buf, at)
}

// toLog fills l from a kindLog record; its byte slices alias the record's
// buffer, which the caller allocated for this read alone.
func (rec *record) toLog(l *raft.Log) {
	l.Index, l.Term, l.Type = rec.index, rec.term, rec.typ
	l.Data, l.Extensions = nilIfEmpty(rec.data), nilIfEmpty(rec.ext)
	l.AppendedAt = time.Time{}
	if rec.at != 0 {
		l.AppendedAt = time.Unix(0, rec.at)
	}
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// asMove turns a copy of a kindLog or kindMove record into a kindMove
// record without the commit mark.
func asMove(b []byte) {
	b[headerLen] = kindMove
	finishRecord(b, 0)
}
