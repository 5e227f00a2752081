package streamlog

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// Chunk is one chunk handed out by a Reader. It is valid until the next
// call on that Reader (its memory and file are the reader's).
//
// A chunk is either in memory (Bytes holds the whole stored chunk: header,
// bloom filter, data, trailer) or a file section (Bytes is nil; the data is
// DataSection of the segment file, for sendfile). HeaderBytes and
// DataSection work for both. What a stream-protocol Deliver carries is the
// 48-byte header as stored followed by the data: osiris sends neither the
// bloom filter nor the trailer, and clients read DataLen bytes after the
// header.
type Chunk struct {
	Header Header
	raw    []byte
	hdr    [HeaderSize]byte
	file   *os.File
	pos    int64 // position of the chunk in file
}

// InMemory reports whether the whole chunk is in memory (Bytes).
func (c *Chunk) InMemory() bool { return c.raw != nil }

// Bytes is the whole chunk as stored, or nil for a file section.
func (c *Chunk) Bytes() []byte { return c.raw }

// HeaderBytes is the chunk's 48-byte header as stored.
func (c *Chunk) HeaderBytes() []byte {
	if c.raw != nil {
		return c.raw[:HeaderSize]
	}
	return c.hdr[:]
}

// Wire is what a stream-protocol Deliver carries after its own fields —
// the header as stored followed by the data — as one slice, for an
// in-memory chunk (nil for a file section: send HeaderBytes, then
// DataSection).
func (c *Chunk) Wire() []byte {
	if c.raw == nil || c.Header.BloomSize != 0 {
		return nil
	}
	return c.raw[:HeaderSize+int64(c.Header.DataLen)]
}

// Data is the chunk's data (its entries), or nil for a file section.
func (c *Chunk) Data() []byte {
	if c.raw == nil {
		return nil
	}
	ds := c.Header.DataStart()
	return c.raw[ds : ds+int64(c.Header.DataLen)]
}

// Trailer is the chunk's trailer (tracking records), or nil for a file
// section.
func (c *Chunk) Trailer() []byte {
	if c.raw == nil {
		return nil
	}
	ds := c.Header.DataStart() + int64(c.Header.DataLen)
	return c.raw[ds : ds+int64(c.Header.TrailerLen)]
}

// DataSection locates the chunk's data in its segment file: for sendfile
// (or a copy) of length n from offset off of f.
func (c *Chunk) DataSection() (f *os.File, off, n int64) {
	return c.file, c.pos + c.Header.DataStart(), int64(c.Header.DataLen)
}

// Section locates the whole stored chunk in its segment file.
func (c *Chunk) Section() (f *os.File, off, n int64) {
	return c.file, c.pos, c.Header.Size()
}

// Entries iterates the records of an in-memory user chunk.
func (c *Chunk) Entries() Entries {
	return Entries{data: c.Data(), off: c.Header.ChunkID}
}

// IterEntries iterates the records of chunk data (a user chunk's Data),
// the first of which has offset first. It is what Chunk.Entries does, for
// callers holding the bytes (e.g. a client-side parser, tests).
func IterEntries(data []byte, first uint64) Entries {
	return Entries{data: data, off: first}
}

// Entries iterates a user chunk's records with their offsets: simple
// entries, and the records of sub-batches (uncompressed or gzip). Records
// of sub-batches in other compressions are skipped (their offsets too) and
// Err reports ErrUnsupportedCompression. Iterating allocates nothing but
// for gzip sub-batches. Malformed data ends the iteration with Err set to
// an ErrCorrupt error; it never panics.
type Entries struct {
	data    []byte
	p       int
	off     uint64
	sub     []byte
	sp      int
	subLeft int
	err     error
	gz      []byte
}

// Next returns the next record and its offset; ok is false at the end.
func (e *Entries) Next() (offset uint64, msg []byte, ok bool) {
	for {
		if e.subLeft > 0 {
			if len(e.sub)-e.sp < 4 {
				e.fail("torn record in sub-batch")
				return 0, nil, false
			}
			n := binary.BigEndian.Uint32(e.sub[e.sp:])
			if uint64(n) > uint64(len(e.sub)-e.sp-4) {
				e.fail("record overruns sub-batch")
				return 0, nil, false
			}
			msg = e.sub[e.sp+4 : e.sp+4+int(n)]
			e.sp += 4 + int(n)
			e.subLeft--
			offset = e.off
			e.off++
			return offset, msg, true
		}
		if e.p >= len(e.data) {
			return 0, nil, false
		}
		d := e.data[e.p:]
		if d[0]&0x80 == 0 {
			if len(d) < 4 {
				e.fail("torn entry")
				return 0, nil, false
			}
			n := binary.BigEndian.Uint32(d)
			if uint64(n) > uint64(len(d)-4) {
				e.fail("entry overruns data")
				return 0, nil, false
			}
			e.p += 4 + int(n)
			offset = e.off
			e.off++
			return offset, d[4 : 4+n], true
		}
		if len(d) < subBatchHeaderSize {
			e.fail("torn sub-batch")
			return 0, nil, false
		}
		comp := d[0] >> 4 & 0x7
		nr := int(binary.BigEndian.Uint16(d[1:]))
		ulen := binary.BigEndian.Uint32(d[3:])
		n := binary.BigEndian.Uint32(d[7:])
		if uint64(n) > uint64(len(d)-subBatchHeaderSize) {
			e.fail("sub-batch overruns data")
			return 0, nil, false
		}
		payload := d[subBatchHeaderSize : subBatchHeaderSize+int(n)]
		e.p += subBatchHeaderSize + int(n)
		switch comp {
		case CompressionNone:
			e.sub = payload
		case CompressionGzip:
			b, err := gunzip(e.gz[:0], payload, ulen)
			if err != nil {
				e.err = fmt.Errorf("%w: gzip sub-batch at offset %d: %v", ErrCorrupt, e.off, err)
				e.off += uint64(nr)
				continue
			}
			e.gz = b
			e.sub = b
		default:
			e.err = ErrUnsupportedCompression
			e.off += uint64(nr)
			continue
		}
		e.sp, e.subLeft = 0, nr
	}
}

// Err reports what ended or disturbed the iteration, nil if nothing did.
func (e *Entries) Err() error { return e.err }

func (e *Entries) fail(what string) {
	e.err = fmt.Errorf("%w: %s at offset %d", ErrCorrupt, what, e.off)
	e.p = len(e.data)
	e.subLeft = 0
}

// maxSubBatch bounds what one gzip sub-batch may decompress to.
const maxSubBatch = 64 << 20

func gunzip(dst, src []byte, ulen uint32) ([]byte, error) {
	if ulen > maxSubBatch {
		return nil, fmt.Errorf("sub-batch of %d bytes uncompressed", ulen)
	}
	zr, err := gzip.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(dst)
	buf.Grow(int(ulen))
	n, err := io.Copy(buf, io.LimitReader(zr, int64(ulen)+1))
	if err != nil {
		return nil, err
	}
	if n != int64(ulen) {
		return nil, fmt.Errorf("sub-batch uncompresses to %d bytes, not %d", n, ulen)
	}
	return buf.Bytes(), nil
}
