package amqp10

// Allocation-free reading of the parts of a message the AMQP 0.9.1 side
// needs: a cursor over the encoded bytes that skips what it does not use.

// fixedWidth is the size of the value following a fixed-width type code,
// or -1 for codes that are not fixed-width.
func fixedWidth(c byte) int {
	switch c {
	case tNull, tTrue, tFalse, tUint0, tUlong0, tList0:
		return 0
	case tBool, tUbyte, tByte, tSmallUint, tSmallUlong, tSmallInt, tSmallLong:
		return 1
	case tUshort, tShort:
		return 2
	case tUint, tInt, tFloat, tDecimal32, tChar:
		return 4
	case tUlong, tLong, tDouble, tDecimal64, tTimestamp:
		return 8
	case tDecimal128, tUUID:
		return 16
	}
	return -1
}

// skip passes over one value without decoding it.
func (d *decoder) skip(depth int) {
	if depth > maxDepth {
		d.fail("nesting too deep")
		return
	}
	c := d.u8()
	if d.err != nil {
		return
	}
	d.skipOf(c, depth)
}

func (d *decoder) skipOf(c byte, depth int) {
	if c == tDescribed {
		d.skip(depth + 1)
		d.skip(depth + 1)
		return
	}
	if n := fixedWidth(c); n >= 0 {
		d.bytes(n)
		return
	}
	switch c {
	case tVbin8, tStr8, tSym8, tList8, tMap8, tArray8:
		d.bytes(int(d.u8()))
	case tVbin32, tStr32, tSym32, tList32, tMap32, tArray32:
		d.bytes(int(d.u32()))
	default:
		d.fail("unknown type code 0x%02x", c)
	}
}

// compoundStart reads a list or map constructor and returns its element
// count and the position where it ends. A null counts as an empty list.
// The count is bounded by the size (every element takes at least a byte),
// so a forged count can neither make a caller allocate for it nor loop on it.
func (d *decoder) compoundStart(lists bool) (count, end int) {
	c := d.u8()
	switch {
	case c == tNull || (lists && c == tList0):
		return 0, d.p
	case (lists && c == tList8) || (!lists && c == tMap8):
		size := int(d.u8())
		end = d.p + size
		if !d.need(size) || size < 1 {
			d.fail("bad compound size")
			return 0, d.p
		}
		return d.compoundCount(int(d.u8()), size-1), end
	case (lists && c == tList32) || (!lists && c == tMap32):
		size := int(d.u32())
		end = d.p + size
		if !d.need(size) || size < 4 {
			d.fail("bad compound size")
			return 0, d.p
		}
		return d.compoundCount(int(d.u32()), size-4), end
	}
	d.fail("expected a %s, got type 0x%02x", map[bool]string{true: "list", false: "map"}[lists], c)
	return 0, d.p
}

// compoundCount checks a compound's element count against the bytes its
// elements have (room); a count that cannot fit fails the decode.
func (d *decoder) compoundCount(count, room int) int {
	if count > room {
		d.fail("compound count %d exceeds its size %d", count, room)
		return 0
	}
	return count
}

// text reads a string, symbol or binary as bytes (aliasing the message);
// ok is false (and the value skipped) for any other type.
func (d *decoder) text() ([]byte, bool) {
	c := d.u8()
	switch c {
	case tStr8, tSym8, tVbin8:
		return d.bytes(int(d.u8())), true
	case tStr32, tSym32, tVbin32:
		return d.bytes(int(d.u32())), true
	}
	d.skipOf(c, 1)
	return nil, false
}

// peek returns the next type code without consuming it.
func (d *decoder) peek() byte {
	if d.p >= len(d.b) {
		d.fail("truncated at %d", d.p)
		return 0
	}
	return d.b[d.p]
}
