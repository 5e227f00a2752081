package wire

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// MaxNestingDepth bounds how deeply tables and arrays may nest inside one
// another. Deeper input is rejected as malformed when decoding, and encoded
// as void ('V') when encoding, so neither hostile frames nor cyclic Go
// values can exhaust the stack.
const MaxNestingDepth = 64

// Table is an AMQP field table. Decoded values have these Go types, by
// RabbitMQ's type letter:
//
//	't' bool      'b' int8     'B' uint8    's' int16   'u' uint16
//	'I' int32     'i' uint32   'l' int64    'f' float32 'd' float64
//	'D' Decimal   'S' string   'x' []byte   'A' []any   'T' time.Time (UTC, seconds)
//	'F' Table     'V' nil
//
// AppendTable accepts the same types, plus int, uint, uint64 (encoded as
// 'l'), map[string]any (as 'F') and []string (as 'A' of 'S').
// An empty table decodes as a nil Table.
type Table map[string]any

// Decimal is the AMQP decimal value: Value / 10^Scale.
type Decimal struct {
	Scale uint8
	Value int32
}

// DecodeTable decodes a field table; b starts at the table's 4-byte length.
// It returns the table and the number of bytes consumed. Keys and values
// are copied out of b.
func DecodeTable(b []byte) (Table, int, error) {
	return decodeTable(b, 0)
}

func malformed(what string) error {
	return fmt.Errorf("%w: %s", ErrMalformed, what)
}

func decodeTable(b []byte, depth int) (Table, int, error) {
	if depth >= MaxNestingDepth {
		return nil, 0, ErrTooDeep
	}
	if len(b) < 4 {
		return nil, 0, malformed("truncated table length")
	}
	size := binary.BigEndian.Uint32(b)
	if uint64(size) > uint64(len(b)-4) {
		return nil, 0, malformed(fmt.Sprintf("table of %d bytes exceeds remaining %d", size, len(b)-4))
	}
	body := b[4 : 4+int(size)]
	var t Table
	for off := 0; off < len(body); {
		klen := int(body[off])
		if off+1+klen+1 > len(body) {
			return nil, 0, malformed("truncated table key")
		}
		key := string(body[off+1 : off+1+klen])
		off += 1 + klen
		v, n, err := decodeValue(body[off:], depth)
		if err != nil {
			return nil, 0, fmt.Errorf("table key %q: %w", key, err)
		}
		off += n
		if t == nil {
			t = make(Table)
		}
		t[key] = v
	}
	return t, 4 + int(size), nil
}

func decodeArray(b []byte, depth int) ([]any, int, error) {
	if depth >= MaxNestingDepth {
		return nil, 0, ErrTooDeep
	}
	if len(b) < 4 {
		return nil, 0, malformed("truncated array length")
	}
	size := binary.BigEndian.Uint32(b)
	if uint64(size) > uint64(len(b)-4) {
		return nil, 0, malformed(fmt.Sprintf("array of %d bytes exceeds remaining %d", size, len(b)-4))
	}
	body := b[4 : 4+int(size)]
	var a []any
	for off := 0; off < len(body); {
		v, n, err := decodeValue(body[off:], depth)
		if err != nil {
			return nil, 0, fmt.Errorf("array element %d: %w", len(a), err)
		}
		off += n
		a = append(a, v)
	}
	return a, 4 + int(size), nil
}

// decodeValue decodes a type letter and its value from b (len(b) >= 1).
func decodeValue(b []byte, depth int) (any, int, error) {
	if len(b) < 1 {
		return nil, 0, malformed("missing field type")
	}
	kind, v := b[0], b[1:]
	fixed := func(n int) bool { return len(v) >= n }
	switch kind {
	case 't':
		if fixed(1) {
			return v[0] != 0, 2, nil
		}
	case 'b':
		if fixed(1) {
			return int8(v[0]), 2, nil
		}
	case 'B':
		if fixed(1) {
			return v[0], 2, nil
		}
	case 's':
		if fixed(2) {
			return int16(binary.BigEndian.Uint16(v)), 3, nil
		}
	case 'u':
		if fixed(2) {
			return binary.BigEndian.Uint16(v), 3, nil
		}
	case 'I':
		if fixed(4) {
			return int32(binary.BigEndian.Uint32(v)), 5, nil
		}
	case 'i':
		if fixed(4) {
			return binary.BigEndian.Uint32(v), 5, nil
		}
	case 'l':
		if fixed(8) {
			return int64(binary.BigEndian.Uint64(v)), 9, nil
		}
	case 'f':
		if fixed(4) {
			return math.Float32frombits(binary.BigEndian.Uint32(v)), 5, nil
		}
	case 'd':
		if fixed(8) {
			return math.Float64frombits(binary.BigEndian.Uint64(v)), 9, nil
		}
	case 'D':
		if fixed(5) {
			return Decimal{Scale: v[0], Value: int32(binary.BigEndian.Uint32(v[1:]))}, 6, nil
		}
	case 'T':
		if fixed(8) {
			return time.Unix(int64(binary.BigEndian.Uint64(v)), 0).UTC(), 9, nil
		}
	case 'V':
		return nil, 1, nil
	case 'S', 'x':
		if !fixed(4) {
			break
		}
		n := binary.BigEndian.Uint32(v)
		if uint64(n) > uint64(len(v)-4) {
			return nil, 0, malformed(fmt.Sprintf("string of %d bytes exceeds remaining %d", n, len(v)-4))
		}
		if kind == 'S' {
			return string(v[4 : 4+n]), 5 + int(n), nil
		}
		return slices.Clone(v[4 : 4+n : 4+n]), 5 + int(n), nil
	case 'A':
		a, n, err := decodeArray(v, depth+1)
		if err != nil {
			return nil, 0, err
		}
		return a, 1 + n, nil
	case 'F':
		t, n, err := decodeTable(v, depth+1)
		if err != nil {
			return nil, 0, err
		}
		return t, 1 + n, nil
	default:
		return nil, 0, malformed(fmt.Sprintf("unknown field type %q", kind))
	}
	return nil, 0, malformed(fmt.Sprintf("truncated field of type %q", kind))
}

// AppendTable appends t as a field table (4-byte length, then entries) to
// b. Keys are written in sorted order, so equal tables encode to equal
// bytes. A nil or empty table encodes as four zero bytes.
func AppendTable(b []byte, t Table) []byte {
	return appendTable(b, t, 0)
}

func appendTable(b []byte, t Table, depth int) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	switch len(t) {
	case 0:
	case 1:
		for k, v := range t {
			b = appendShortstr(b, k)
			b = appendValue(b, v, depth)
		}
	default:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			b = appendShortstr(b, k)
			b = appendValue(b, t[k], depth)
		}
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

func appendArray(b []byte, a []any, depth int) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	for _, v := range a {
		b = appendValue(b, v, depth)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

func appendValue(b []byte, v any, depth int) []byte {
	switch v := v.(type) {
	case bool:
		return append(b, 't', bit(v, 1))
	case int8:
		return append(b, 'b', byte(v))
	case uint8:
		return append(b, 'B', v)
	case int16:
		return appendShort(append(b, 's'), uint16(v))
	case uint16:
		return appendShort(append(b, 'u'), v)
	case int32:
		return appendLong(append(b, 'I'), uint32(v))
	case uint32:
		return appendLong(append(b, 'i'), v)
	case int64:
		return appendLonglong(append(b, 'l'), uint64(v))
	case int:
		return appendLonglong(append(b, 'l'), uint64(v))
	case uint:
		return appendLonglong(append(b, 'l'), uint64(v))
	case uint64:
		return appendLonglong(append(b, 'l'), v)
	case float32:
		return appendLong(append(b, 'f'), math.Float32bits(v))
	case float64:
		return appendLonglong(append(b, 'd'), math.Float64bits(v))
	case Decimal:
		return appendLong(append(b, 'D', v.Scale), uint32(v.Value))
	case string:
		return appendLongstr(append(b, 'S'), v)
	case []byte:
		b = appendLong(append(b, 'x'), uint32(len(v)))
		return append(b, v...)
	case time.Time:
		return appendLonglong(append(b, 'T'), uint64(v.Unix()))
	}
	if depth+1 >= MaxNestingDepth {
		return append(b, 'V')
	}
	switch v := v.(type) {
	case Table:
		return appendTable(append(b, 'F'), v, depth+1)
	case map[string]any:
		return appendTable(append(b, 'F'), Table(v), depth+1)
	case []any:
		return appendArray(append(b, 'A'), v, depth+1)
	case []string:
		start := len(b)
		b = append(b, 'A', 0, 0, 0, 0)
		for _, s := range v {
			b = appendLongstr(append(b, 'S'), s)
		}
		binary.BigEndian.PutUint32(b[start+1:], uint32(len(b)-start-5))
		return b
	}
	return append(b, 'V')
}
