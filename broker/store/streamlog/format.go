package streamlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sizes and constants of osiris's on-disk layout.
const (
	// HeaderSize is the size of a chunk header.
	HeaderSize = 48
	// IndexRecordSize is the size of one index record.
	IndexRecordSize = 29
	// FileHeaderSize is the size of the header of a segment or index file.
	FileHeaderSize = 8

	chunkMagic   = 0x5
	chunkVersion = 0x1
	// MagicVersion is the first byte of every chunk header (magic 5 in
	// the high nibble, version 1 in the low nibble).
	MagicVersion = chunkMagic<<4 | chunkVersion

	fileVersion = 1

	// MaxEntries is the largest number of entries in one chunk (the
	// header's field is 16 bits).
	MaxEntries = 0xFFFF

	// simpleEntryMax is the largest simple entry (31-bit length).
	simpleEntryMax = 1<<31 - 1
	// subBatchHeaderSize is the size of a sub-batch entry's header:
	// flags(1) num records(2) uncompressed length(4) length(4).
	subBatchHeaderSize = 11
)

var (
	segmentMagic = [4]byte{'O', 'S', 'I', 'L'}
	indexMagic   = [4]byte{'O', 'S', 'I', 'I'}
)

// ChunkType is the type byte of a chunk header.
type ChunkType uint8

// Chunk types, as osiris.
const (
	// ChunkUser holds messages published by clients.
	ChunkUser ChunkType = 0
	// ChunkTrackingDelta holds consumer offsets stored since the last
	// tracking chunk (store offset).
	ChunkTrackingDelta ChunkType = 1
	// ChunkTrackingSnapshot holds the whole tracking state (consumer
	// offsets and publisher sequences); it opens every segment after the
	// first so that retention never loses tracking state.
	ChunkTrackingSnapshot ChunkType = 2
)

// Tracking record types in tracking chunks and user chunk trailers.
const (
	trackSequence  = 0 // type(1) len(1) ref chunkid(8) seq(8): publisher de-dup
	trackOffset    = 1 // type(1) len(1) ref offset(8): consumer offset
	trackTimestamp = 2 // type(1) len(1) ref timestamp(8): not written, skipped
)

// Compression types of sub-batch entries (the stream protocol's values).
const (
	CompressionNone   = 0
	CompressionGzip   = 1
	CompressionSnappy = 2
	CompressionLz4    = 3
	CompressionZstd   = 4
)

// Errors.
var (
	// ErrCorrupt reports a chunk or file that does not parse or whose CRC
	// does not match. It is wrapped with the position.
	ErrCorrupt = errors.New("streamlog: corrupt data")
	// ErrClosed is returned by operations on a closed Log or Reader.
	ErrClosed = errors.New("streamlog: closed")
	// ErrBatchFull is returned when a batch already holds MaxEntries
	// entries or would exceed the maximum chunk size.
	ErrBatchFull = errors.New("streamlog: batch full")
	// ErrEmptyBatch is returned by Append for a batch with no entries and
	// no tracking.
	ErrEmptyBatch = errors.New("streamlog: empty batch")
	// ErrRefTooLong is returned for a tracking reference over 255 bytes.
	ErrRefTooLong = errors.New("streamlog: reference longer than 255 bytes")
	// ErrUnsupportedCompression is returned by Entries.Next for a
	// sub-batch compressed with anything but none or gzip.
	ErrUnsupportedCompression = errors.New("streamlog: unsupported sub-batch compression")
	// ErrOffsetOutOfRange is never returned by NewReader (out-of-range
	// offsets are clamped, as osiris); it is reserved for callers.
	ErrOffsetOutOfRange = errors.New("streamlog: offset out of range")
)

// Header is a parsed 48-byte chunk header:
//
//	magic(4 bits)=5 version(4 bits)=1 | chunk type(1) | num entries(2)
//	num records(4) | timestamp(8, ms since epoch, signed) | epoch(8)
//	chunk id(8) | crc32 IEEE of data(4) | data length(4) | trailer length(4)
//	bloom filter size(1) | reserved(3): Warren's header/trailer check
//
// followed on disk by the bloom filter (BloomSize bytes), the data
// (DataLen bytes of entries) and the trailer (TrailerLen bytes of tracking
// records). All integers are big-endian.
type Header struct {
	Type       ChunkType
	NumEntries uint16
	NumRecords uint32
	Timestamp  int64 // milliseconds since the Unix epoch
	Epoch      uint64
	ChunkID    uint64 // offset of the chunk's first record
	CRC        uint32
	DataLen    uint32
	TrailerLen uint32
	BloomSize  uint8
	// Check is the 24-bit check of the header and trailer kept in the
	// header's reserved bytes (see headerCheck).
	Check uint32
}

// Size is the size of the whole chunk as stored.
func (h *Header) Size() int64 {
	return HeaderSize + int64(h.BloomSize) + int64(h.DataLen) + int64(h.TrailerLen)
}

// NextOffset is the chunk id of the chunk that follows this one.
func (h *Header) NextOffset() uint64 { return h.ChunkID + uint64(h.NumRecords) }

// DataStart is the position of the data relative to the chunk's start.
func (h *Header) DataStart() int64 { return HeaderSize + int64(h.BloomSize) }

// ParseHeader parses a chunk header from b (at least HeaderSize bytes). It
// checks the magic, version and type, not the CRC.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if err := h.parse(b); err != nil {
		return Header{}, err
	}
	return h, nil
}

// parse is ParseHeader into h, field by field: the reader's hot path
// parses into its chunk in place, since copying a Header just written
// field by field stalls the CPU's store forwarding. h is undefined after
// an error.
func (h *Header) parse(b []byte) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: short chunk header (%d bytes)", ErrCorrupt, len(b))
	}
	if b[0] != MagicVersion {
		return fmt.Errorf("%w: bad chunk magic/version 0x%02x", ErrCorrupt, b[0])
	}
	b = b[:HeaderSize]
	h.Type = ChunkType(b[1])
	h.NumEntries = binary.BigEndian.Uint16(b[2:])
	h.NumRecords = binary.BigEndian.Uint32(b[4:])
	h.Timestamp = int64(binary.BigEndian.Uint64(b[8:]))
	h.Epoch = binary.BigEndian.Uint64(b[16:])
	h.ChunkID = binary.BigEndian.Uint64(b[24:])
	h.CRC = binary.BigEndian.Uint32(b[32:])
	h.DataLen = binary.BigEndian.Uint32(b[36:])
	h.TrailerLen = binary.BigEndian.Uint32(b[40:])
	h.BloomSize = b[44]
	h.Check = uint32(b[45])<<16 | uint32(b[46])<<8 | uint32(b[47])
	if h.Type > ChunkTrackingSnapshot {
		return fmt.Errorf("%w: unknown chunk type %d", ErrCorrupt, h.Type)
	}
	if h.NumRecords == 0 && h.Type != ChunkTrackingSnapshot {
		return fmt.Errorf("%w: chunk %d without records", ErrCorrupt, h.ChunkID)
	}
	if uint32(h.NumEntries) > h.NumRecords {
		return fmt.Errorf("%w: chunk %d has %d entries but %d records", ErrCorrupt, h.ChunkID, h.NumEntries, h.NumRecords)
	}
	return nil
}

// put writes h into b[:HeaderSize].
func (h *Header) put(b []byte) {
	b[0] = MagicVersion
	b[1] = byte(h.Type)
	binary.BigEndian.PutUint16(b[2:], h.NumEntries)
	binary.BigEndian.PutUint32(b[4:], h.NumRecords)
	binary.BigEndian.PutUint64(b[8:], uint64(h.Timestamp))
	binary.BigEndian.PutUint64(b[16:], h.Epoch)
	binary.BigEndian.PutUint64(b[24:], h.ChunkID)
	binary.BigEndian.PutUint32(b[32:], h.CRC)
	binary.BigEndian.PutUint32(b[36:], h.DataLen)
	binary.BigEndian.PutUint32(b[40:], h.TrailerLen)
	b[44] = h.BloomSize
	b[45], b[46], b[47] = byte(h.Check>>16), byte(h.Check>>8), byte(h.Check)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// headerCheck is what Warren keeps in a chunk header's 3 reserved bytes
// (which osiris leaves zero and clients ignore): the low 24 bits of the
// CRC-32C of the header's first 45 bytes, the bloom filter and the
// trailer. osiris's CRC covers only the data; this also catches a torn or
// damaged trailer or filter, or header fields (timestamp, epoch, lengths)
// that the data CRC does not cover, when recovering a log's tail.
func headerCheck(hdr, bloom, trailer []byte) uint32 {
	c := crc32.Update(0, castagnoli, hdr[:45])
	c = crc32.Update(c, castagnoli, bloom)
	return crc32.Update(c, castagnoli, trailer) & 0xFFFFFF
}

// ParseChunk parses and validates one whole chunk at the start of b: the
// header, the CRC of the data and the structure of its entries (and, for
// tracking chunks, of its tracking records) and of the trailer. It returns
// the header and the chunk's total size. It never panics, whatever b holds.
func ParseChunk(b []byte) (Header, int, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, 0, err
	}
	size := h.Size()
	if int64(len(b)) < size {
		return h, 0, fmt.Errorf("%w: chunk %d truncated: %d of %d bytes", ErrCorrupt, h.ChunkID, len(b), size)
	}
	ds := h.DataStart()
	data := b[ds : ds+int64(h.DataLen)]
	if crc32.ChecksumIEEE(data) != h.CRC {
		return h, 0, fmt.Errorf("%w: chunk %d CRC mismatch", ErrCorrupt, h.ChunkID)
	}
	if err := checkEntries(&h, data); err != nil {
		return h, 0, err
	}
	trailer := b[ds+int64(h.DataLen) : size]
	if got := headerCheck(b, b[HeaderSize:ds], trailer); got != h.Check {
		return h, 0, fmt.Errorf("%w: chunk %d header/trailer check mismatch", ErrCorrupt, h.ChunkID)
	}
	if err := walkTracking(trailer, nil); err != nil {
		return h, 0, fmt.Errorf("chunk %d trailer: %w", h.ChunkID, err)
	}
	return h, int(size), nil
}

// checkEntries validates the structure of a chunk's data against its
// header's entry and record counts.
func checkEntries(h *Header, data []byte) error {
	if h.Type != ChunkUser {
		if err := walkTracking(data, nil); err != nil {
			return fmt.Errorf("chunk %d tracking data: %w", h.ChunkID, err)
		}
		return nil
	}
	var entries, records uint64
	for p := 0; p < len(data); {
		if len(data)-p < 4 {
			return fmt.Errorf("%w: chunk %d: torn entry at %d", ErrCorrupt, h.ChunkID, p)
		}
		if data[p]&0x80 == 0 {
			n := int(binary.BigEndian.Uint32(data[p:]))
			if n > len(data)-p-4 {
				return fmt.Errorf("%w: chunk %d: entry at %d overruns data", ErrCorrupt, h.ChunkID, p)
			}
			p += 4 + n
			records++
		} else {
			if len(data)-p < subBatchHeaderSize {
				return fmt.Errorf("%w: chunk %d: torn sub-batch at %d", ErrCorrupt, h.ChunkID, p)
			}
			nr := binary.BigEndian.Uint16(data[p+1:])
			n := int(binary.BigEndian.Uint32(data[p+7:]))
			if n < 0 || n > len(data)-p-subBatchHeaderSize {
				return fmt.Errorf("%w: chunk %d: sub-batch at %d overruns data", ErrCorrupt, h.ChunkID, p)
			}
			p += subBatchHeaderSize + n
			records += uint64(nr)
		}
		entries++
	}
	if entries != uint64(h.NumEntries) || records != uint64(h.NumRecords) {
		return fmt.Errorf("%w: chunk %d: %d entries/%d records, header says %d/%d",
			ErrCorrupt, h.ChunkID, entries, records, h.NumEntries, h.NumRecords)
	}
	return nil
}

// walkTracking parses tracking records; fn (if not nil) gets each one.
// For trackSequence, val is the sequence and chunk the chunk id; for
// trackOffset, val is the offset.
func walkTracking(b []byte, fn func(typ byte, ref []byte, chunk, val uint64)) error {
	for p := 0; p < len(b); {
		if len(b)-p < 2 {
			return fmt.Errorf("%w: torn tracking record at %d", ErrCorrupt, p)
		}
		typ, n := b[p], int(b[p+1])
		var body int
		switch typ {
		case trackSequence:
			body = 16
		case trackOffset, trackTimestamp:
			body = 8
		default:
			return fmt.Errorf("%w: unknown tracking record type %d", ErrCorrupt, typ)
		}
		if len(b)-p < 2+n+body {
			return fmt.Errorf("%w: torn tracking record at %d", ErrCorrupt, p)
		}
		ref := b[p+2 : p+2+n]
		q := p + 2 + n
		if fn != nil {
			switch typ {
			case trackSequence:
				fn(typ, ref, binary.BigEndian.Uint64(b[q:]), binary.BigEndian.Uint64(b[q+8:]))
			case trackOffset:
				fn(typ, ref, 0, binary.BigEndian.Uint64(b[q:]))
			}
		}
		p = q + body
	}
	return nil
}

func appendTrackSeq(b []byte, ref string, chunk, seq uint64) []byte {
	b = append(b, trackSequence, byte(len(ref)))
	b = append(b, ref...)
	b = binary.BigEndian.AppendUint64(b, chunk)
	return binary.BigEndian.AppendUint64(b, seq)
}

func appendTrackOffset(b []byte, ref string, off uint64) []byte {
	b = append(b, trackOffset, byte(len(ref)))
	b = append(b, ref...)
	return binary.BigEndian.AppendUint64(b, off)
}

// indexRecord is one record of an index file:
//
//	chunk id(8) timestamp(8) epoch(8) file position(4) chunk type(1)
type indexRecord struct {
	ChunkID   uint64
	Timestamp int64
	Epoch     uint64
	Pos       uint32
	Type      ChunkType
}

func (r *indexRecord) put(b []byte) {
	binary.BigEndian.PutUint64(b[0:], r.ChunkID)
	binary.BigEndian.PutUint64(b[8:], uint64(r.Timestamp))
	binary.BigEndian.PutUint64(b[16:], r.Epoch)
	binary.BigEndian.PutUint32(b[24:], r.Pos)
	b[28] = byte(r.Type)
}

func parseIndexRecord(b []byte) indexRecord {
	return indexRecord{
		ChunkID:   binary.BigEndian.Uint64(b[0:]),
		Timestamp: int64(binary.BigEndian.Uint64(b[8:])),
		Epoch:     binary.BigEndian.Uint64(b[16:]),
		Pos:       binary.BigEndian.Uint32(b[24:]),
		Type:      ChunkType(b[28]),
	}
}

func fileHeader(magic [4]byte) []byte {
	b := make([]byte, FileHeaderSize)
	copy(b, magic[:])
	binary.BigEndian.PutUint32(b[4:], fileVersion)
	return b
}

func putUint64(b []byte, v uint64) { binary.BigEndian.PutUint64(b, v) }
