package wire

import (
	"encoding/binary"
	"fmt"
)

// decoder reads AMQP primitive domains from b. The first error is sticky:
// after it, every read returns a zero value, so generated code can decode
// all fields and check d.err once.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated %s at offset %d", ErrMalformed, what, d.off)
	}
}

func (d *decoder) need(n int, what string) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.b)-d.off < n {
		d.fail(what)
		return false
	}
	return true
}

func (d *decoder) octet() uint8 {
	if !d.need(1, "octet") {
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) short() uint16 {
	if !d.need(2, "short") {
		return 0
	}
	v := binary.BigEndian.Uint16(d.b[d.off:])
	d.off += 2
	return v
}

func (d *decoder) long() uint32 {
	if !d.need(4, "long") {
		return 0
	}
	v := binary.BigEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *decoder) longlong() uint64 {
	if !d.need(8, "longlong") {
		return 0
	}
	v := binary.BigEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

// shortstr returns a copy of a short string (the frame buffer is reused).
func (d *decoder) shortstr() string {
	if !d.need(1, "shortstr") {
		return ""
	}
	n := int(d.b[d.off])
	if !d.need(1+n, "shortstr") {
		return ""
	}
	s := string(d.b[d.off+1 : d.off+1+n])
	d.off += 1 + n
	return s
}

// longstr returns a copy of a long string.
func (d *decoder) longstr() string {
	if !d.need(4, "longstr") {
		return ""
	}
	n := binary.BigEndian.Uint32(d.b[d.off:])
	if uint64(n) > uint64(len(d.b)-d.off-4) {
		d.fail("longstr")
		return ""
	}
	s := string(d.b[d.off+4 : d.off+4+int(n)])
	d.off += 4 + int(n)
	return s
}

func (d *decoder) table() Table {
	if d.err != nil {
		return nil
	}
	t, n, err := decodeTable(d.b[d.off:], 0)
	if err != nil {
		d.err = err
		return nil
	}
	d.off += n
	return t
}

// Encoding helpers. They append to b and never fail: strings longer than
// their domain allows are truncated (a short string holds at most 255
// bytes), which keeps every frame well formed.

func appendShort(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }

func appendLong(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

func appendLonglong(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendShortstr(b []byte, s string) []byte {
	if len(s) > 255 {
		s = s[:255]
	}
	b = append(b, byte(len(s)))
	return append(b, s...)
}

func appendLongstr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func bit(v bool, mask uint8) uint8 {
	if v {
		return mask
	}
	return 0
}
