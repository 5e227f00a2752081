package amqp10

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrMalformed reports bytes that are not a well-formed AMQP 1.0 message.
var ErrMalformed = errors.New("amqp10: malformed message")

// Type codes (AMQP 1.0 part 1, section 1.6).
const (
	tDescribed  = 0x00
	tNull       = 0x40
	tTrue       = 0x41
	tFalse      = 0x42
	tBool       = 0x56
	tUbyte      = 0x50
	tUshort     = 0x60
	tUint       = 0x70
	tSmallUint  = 0x52
	tUint0      = 0x43
	tUlong      = 0x80
	tSmallUlong = 0x53
	tUlong0     = 0x44
	tByte       = 0x51
	tShort      = 0x61
	tInt        = 0x71
	tSmallInt   = 0x54
	tLong       = 0x81
	tSmallLong  = 0x55
	tFloat      = 0x72
	tDouble     = 0x82
	tDecimal32  = 0x74
	tDecimal64  = 0x84
	tDecimal128 = 0x94
	tChar       = 0x73
	tTimestamp  = 0x83
	tUUID       = 0x98
	tVbin8      = 0xa0
	tVbin32     = 0xb0
	tStr8       = 0xa1
	tStr32      = 0xb1
	tSym8       = 0xa3
	tSym32      = 0xb3
	tList0      = 0x45
	tList8      = 0xc0
	tList32     = 0xd0
	tMap8       = 0xc1
	tMap32      = 0xd1
	tArray8     = 0xe0
	tArray32    = 0xf0
)

// Section descriptors (AMQP 1.0 part 3, section 3.2).
const (
	secHeader      = 0x70
	secDeliveryAnn = 0x71
	secMessageAnn  = 0x72
	secProperties  = 0x73
	secAppProps    = 0x74
	secData        = 0x75
	secSequence    = 0x76
	secValue       = 0x77
	secFooter      = 0x78
)

// Symbol is an AMQP symbol (decoded symbols are Symbol, strings string).
type Symbol string

// UUID is an AMQP uuid.
type UUID [16]byte

func (u UUID) String() string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// maxDepth bounds the nesting of decoded compound values.
const maxDepth = 32

// decoder reads AMQP 1.0 values; the first error sticks.
type decoder struct {
	b   []byte
	p   int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
	d.p = len(d.b)
}

func (d *decoder) need(n int) bool {
	if n < 0 || len(d.b)-d.p < n {
		d.truncated()
		return false
	}
	return true
}

//go:noinline
func (d *decoder) truncated() { d.fail("truncated at %d", d.p) }

func (d *decoder) u8() byte {
	if !d.need(1) {
		return 0
	}
	d.p++
	return d.b[d.p-1]
}

func (d *decoder) u16() uint16 {
	if !d.need(2) {
		return 0
	}
	d.p += 2
	return binary.BigEndian.Uint16(d.b[d.p-2:])
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	d.p += 4
	return binary.BigEndian.Uint32(d.b[d.p-4:])
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	d.p += 8
	return binary.BigEndian.Uint64(d.b[d.p-8:])
}

func (d *decoder) bytes(n int) []byte {
	if !d.need(n) {
		return nil
	}
	d.p += n
	return d.b[d.p-n : d.p]
}

// value decodes one value of any type. Described values other than
// sections decode to their value (the descriptor is dropped); arrays to
// []any; lists to []any; maps to map[any]any with comparable keys.
func (d *decoder) value(depth int) any {
	if depth > maxDepth {
		d.fail("nesting too deep")
		return nil
	}
	c := d.u8()
	if d.err != nil {
		return nil
	}
	return d.valueOf(c, depth)
}

func (d *decoder) valueOf(c byte, depth int) any {
	switch c {
	case tDescribed:
		d.value(depth + 1) // descriptor
		return d.value(depth + 1)
	case tNull:
		return nil
	case tTrue:
		return true
	case tFalse:
		return false
	case tBool:
		return d.u8() != 0
	case tUbyte:
		return d.u8()
	case tUshort:
		return d.u16()
	case tUint:
		return d.u32()
	case tSmallUint:
		return uint32(d.u8())
	case tUint0:
		return uint32(0)
	case tUlong:
		return d.u64()
	case tSmallUlong:
		return uint64(d.u8())
	case tUlong0:
		return uint64(0)
	case tByte:
		return int8(d.u8())
	case tShort:
		return int16(d.u16())
	case tInt:
		return int32(d.u32())
	case tSmallInt:
		return int32(int8(d.u8()))
	case tLong:
		return int64(d.u64())
	case tSmallLong:
		return int64(int8(d.u8()))
	case tFloat:
		return math.Float32frombits(d.u32())
	case tDouble:
		return math.Float64frombits(d.u64())
	case tDecimal32:
		return d.bytes(4)
	case tDecimal64:
		return d.bytes(8)
	case tDecimal128:
		return d.bytes(16)
	case tChar:
		return rune(d.u32())
	case tTimestamp:
		return time.UnixMilli(int64(d.u64())).UTC()
	case tUUID:
		var u UUID
		copy(u[:], d.bytes(16))
		return u
	case tVbin8:
		return d.bytes(int(d.u8()))
	case tVbin32:
		return d.bytes(int(d.u32()))
	case tStr8:
		return string(d.bytes(int(d.u8())))
	case tStr32:
		return string(d.bytes(int(d.u32())))
	case tSym8:
		return Symbol(d.bytes(int(d.u8())))
	case tSym32:
		return Symbol(d.bytes(int(d.u32())))
	case tList0:
		return []any(nil)
	case tList8, tList32:
		n := d.compound(c == tList32)
		out := make([]any, 0, min(n, 64))
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, d.value(depth+1))
		}
		return out
	case tMap8, tMap32:
		n := d.compound(c == tMap32)
		if n%2 != 0 {
			d.fail("map with odd element count")
			return nil
		}
		out := make(map[any]any, min(n/2, 64))
		for i := 0; i < n/2 && d.err == nil; i++ {
			k := d.value(depth + 1)
			v := d.value(depth + 1)
			if !comparable(k) {
				d.fail("map key of type %T", k)
				return nil
			}
			out[k] = v
		}
		return out
	case tArray8, tArray32:
		n := d.compound(c == tArray32)
		ec := d.u8()
		if ec == tDescribed {
			d.value(depth + 1)
			ec = d.u8()
		}
		out := make([]any, 0, min(n, 64))
		for i := 0; i < n && d.err == nil; i++ {
			out = append(out, d.valueOf(ec, depth+1))
		}
		return out
	}
	d.fail("unknown type code 0x%02x", c)
	return nil
}

// compound reads a list/map/array's size and count; it checks the size
// against the remaining bytes and bounds the count by it.
func (d *decoder) compound(wide bool) int {
	var size, count int
	if wide {
		size = int(d.u32())
		if !d.need(size) || size < 4 {
			d.fail("bad compound size")
			return 0
		}
		count = int(d.u32())
	} else {
		size = int(d.u8())
		if !d.need(size) || size < 1 {
			d.fail("bad compound size")
			return 0
		}
		count = int(d.u8())
	}
	// Every element takes at least one byte (arrays: the constructor
	// stands for all, but each element of a fixed-width type still takes
	// at least one byte, except null/true/false codes).
	if count > size {
		d.fail("compound count %d exceeds its size %d", count, size)
		return 0
	}
	return count
}

func comparable(v any) bool {
	switch v.(type) {
	case nil, bool, uint8, uint16, uint32, uint64, int8, int16, int32, int64, float32, float64, time.Time, UUID, string, Symbol:
		return true
	}
	return false
}

// Encoding.

func appendDescriptor(b []byte, code byte) []byte { return append(b, tDescribed, tSmallUlong, code) }

func appendString(b []byte, s string) []byte {
	if len(s) < 256 {
		return append(append(b, tStr8, byte(len(s))), s...)
	}
	b = binary.BigEndian.AppendUint32(append(b, tStr32), uint32(len(s)))
	return append(b, s...)
}

func appendSymbol(b []byte, s string) []byte {
	if len(s) < 256 {
		return append(append(b, tSym8, byte(len(s))), s...)
	}
	b = binary.BigEndian.AppendUint32(append(b, tSym32), uint32(len(s)))
	return append(b, s...)
}

func appendBinary(b []byte, v []byte) []byte {
	if len(v) < 256 {
		return append(append(b, tVbin8, byte(len(v))), v...)
	}
	b = binary.BigEndian.AppendUint32(append(b, tVbin32), uint32(len(v)))
	return append(b, v...)
}

// beginCompound starts a list32/map32; endCompound fills size and count.
func beginCompound(b []byte, code byte) ([]byte, int) {
	start := len(b)
	return append(b, code, 0, 0, 0, 0, 0, 0, 0, 0), start
}

func endCompound(b []byte, start, count int) []byte {
	binary.BigEndian.PutUint32(b[start+1:], uint32(len(b)-start-5))
	binary.BigEndian.PutUint32(b[start+5:], uint32(count))
	return b
}

// appendValue encodes a Go value (as decoded from an AMQP 0.9.1 table)
// as an AMQP 1.0 simple value; ok is false for compound values.
func appendSimple(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, tNull), true
	case bool:
		if v {
			return append(b, tTrue), true
		}
		return append(b, tFalse), true
	case int8:
		return append(b, tByte, byte(v)), true
	case uint8:
		return append(b, tUbyte, v), true
	case int16:
		return binary.BigEndian.AppendUint16(append(b, tShort), uint16(v)), true
	case uint16:
		return binary.BigEndian.AppendUint16(append(b, tUshort), v), true
	case int32:
		return binary.BigEndian.AppendUint32(append(b, tInt), uint32(v)), true
	case uint32:
		return binary.BigEndian.AppendUint32(append(b, tUint), v), true
	case int64:
		return binary.BigEndian.AppendUint64(append(b, tLong), uint64(v)), true
	case int:
		return binary.BigEndian.AppendUint64(append(b, tLong), uint64(v)), true
	case uint64:
		return binary.BigEndian.AppendUint64(append(b, tUlong), v), true
	case float32:
		return binary.BigEndian.AppendUint32(append(b, tFloat), math.Float32bits(v)), true
	case float64:
		return binary.BigEndian.AppendUint64(append(b, tDouble), math.Float64bits(v)), true
	case string:
		return appendString(b, v), true
	case []byte:
		return appendBinary(b, v), true
	case time.Time:
		return binary.BigEndian.AppendUint64(append(b, tTimestamp), uint64(v.UnixMilli())), true
	}
	return b, false
}
