package wire

import (
	"encoding/binary"
	"fmt"
)

// CheckTable reports whether b starts with a field table that DecodeTable
// accepts, and its length, without building it: it allocates nothing on
// well-formed input. Its answer is DecodeTable's (same errors, same
// length), so a table it accepts can be decoded later, when a message is
// dead-lettered or shown.
func CheckTable(b []byte) (int, error) {
	return checkTable(b, 0)
}

func checkTable(b []byte, depth int) (int, error) {
	if depth >= MaxNestingDepth {
		return 0, ErrTooDeep
	}
	body, err := sizedBody(b, "table")
	if err != nil {
		return 0, err
	}
	for off := 0; off < len(body); {
		klen := int(body[off])
		if off+1+klen+1 > len(body) {
			return 0, malformed("truncated table key")
		}
		off += 1 + klen
		n, err := checkValue(body[off:], depth)
		if err != nil {
			return 0, err
		}
		off += n
	}
	return 4 + len(body), nil
}

func checkArray(b []byte, depth int) (int, error) {
	if depth >= MaxNestingDepth {
		return 0, ErrTooDeep
	}
	body, err := sizedBody(b, "array")
	if err != nil {
		return 0, err
	}
	for off := 0; off < len(body); {
		n, err := checkValue(body[off:], depth)
		if err != nil {
			return 0, err
		}
		off += n
	}
	return 4 + len(body), nil
}

// sizedBody returns the bytes of a table or array: a 4-byte unsigned
// length, checked against what remains before it is used.
func sizedBody(b []byte, what string) ([]byte, error) {
	if len(b) < 4 {
		return nil, malformed("truncated " + what + " length")
	}
	size := binary.BigEndian.Uint32(b)
	if uint64(size) > uint64(len(b)-4) {
		return nil, malformed(fmt.Sprintf("%s of %d bytes exceeds remaining %d", what, size, len(b)-4))
	}
	return b[4 : 4+int(size)], nil
}

// checkValue checks a type letter and its value, as decodeValue reads
// them, and returns their length.
func checkValue(b []byte, depth int) (int, error) {
	if len(b) < 1 {
		return 0, malformed("missing field type")
	}
	kind, v := b[0], b[1:]
	size := 0
	switch kind {
	case 'V':
		return 1, nil
	case 't', 'b', 'B':
		size = 1
	case 's', 'u':
		size = 2
	case 'I', 'i', 'f':
		size = 4
	case 'D':
		size = 5
	case 'l', 'd', 'T':
		size = 8
	case 'S', 'x':
		if len(v) < 4 {
			size = 4 // its length, cut short: refused below
			break
		}
		n := binary.BigEndian.Uint32(v)
		if uint64(n) > uint64(len(v)-4) {
			return 0, malformed(fmt.Sprintf("string of %d bytes exceeds remaining %d", n, len(v)-4))
		}
		return 5 + int(n), nil
	case 'A':
		n, err := checkArray(v, depth+1)
		return 1 + n, err
	case 'F':
		n, err := checkTable(v, depth+1)
		return 1 + n, err
	default:
		return 0, malformed(fmt.Sprintf("unknown field type %q", kind))
	}
	if len(v) < size {
		return 0, malformed(fmt.Sprintf("truncated field of type %q", kind))
	}
	return 1 + size, nil
}
