package streamlog

import (
	"encoding/binary"
	"hash/crc32"
)

// maxChunkData bounds a batch's data so that a chunk always fits a segment
// (index positions are 32 bits).
const maxChunkData = 1<<31 - 1<<20

// Batch collects the entries of one user chunk and the tracking that goes
// with them: what one or several publishers sent in one write interval.
// Append writes it as one chunk. A Batch is reusable (Reset) and builds the
// chunk in place, so appending to a warm Batch allocates nothing. It is not
// safe for concurrent use.
type Batch struct {
	buf     []byte // header space + data, built in place
	entries int
	records int
	trailer []byte // publisher sequences (trackSequence records, chunk id patched at Append)
	seqPos  []int  // positions of the chunk id fields in trailer
	seqRefs []string
	seqVals []uint64
	offsets []byte // consumer offsets (trackOffset records): a tracking chunk
	offRefs []string
	offVals []uint64
	filters []uint64 // hashes of the entries' filter values
}

// NewBatch returns an empty batch.
func NewBatch() *Batch {
	b := &Batch{}
	b.Reset()
	return b
}

// Reset empties the batch, keeping its buffers.
func (b *Batch) Reset() {
	if cap(b.buf) < HeaderSize {
		b.buf = make([]byte, HeaderSize, 4096)
	}
	b.buf = b.buf[:HeaderSize]
	b.entries, b.records = 0, 0
	b.trailer = b.trailer[:0]
	b.seqPos = b.seqPos[:0]
	b.seqRefs = b.seqRefs[:0]
	b.seqVals = b.seqVals[:0]
	b.offsets = b.offsets[:0]
	b.offRefs = b.offRefs[:0]
	b.offVals = b.offVals[:0]
	b.filters = b.filters[:0]
}

// Entries is the number of entries in the batch.
func (b *Batch) Entries() int { return b.entries }

// Records is the number of records (messages) in the batch.
func (b *Batch) Records() int { return b.records }

// DataLen is the number of data bytes in the batch so far.
func (b *Batch) DataLen() int { return len(b.buf) - HeaderSize }

// Empty reports whether the batch holds no entry and no tracking.
func (b *Batch) Empty() bool { return b.entries == 0 && len(b.offRefs) == 0 && len(b.seqRefs) == 0 }

func (b *Batch) room(n int) bool {
	return b.entries < MaxEntries && len(b.buf)-HeaderSize+n <= maxChunkData
}

// AddSimple adds one message (an AMQP 1.0 encoded message, opaque here)
// as a simple entry: size(4, high bit 0) followed by the bytes.
func (b *Batch) AddSimple(msg []byte) error {
	if !b.room(4+len(msg)) || len(msg) > simpleEntryMax {
		return ErrBatchFull
	}
	b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(msg)))
	b.buf = append(b.buf, msg...)
	b.entries++
	b.records++
	return nil
}

// AddFiltered adds a message with a filter value (stream protocol publish
// v2): the chunk gets a bloom filter that readers with a Filter consult.
// Messages added with AddSimple or AddSubBatch to the same batch count as
// unfiltered.
func (b *Batch) AddFiltered(msg []byte, value string) error {
	if err := b.AddSimple(msg); err != nil {
		return err
	}
	b.filters = append(b.filters, filterHash(value))
	return nil
}

// AddSubBatch adds a sub-batch entry as the stream protocol's publish
// carries it: compression type, number of records, uncompressed length and
// the (possibly compressed) bytes, which hold records each prefixed by a
// 32-bit size once uncompressed.
func (b *Batch) AddSubBatch(compression uint8, numRecords uint16, uncompressedLen uint32, data []byte) error {
	if !b.room(subBatchHeaderSize+len(data)) || numRecords == 0 {
		return ErrBatchFull
	}
	b.buf = append(b.buf, 0x80|(compression&0x7)<<4)
	b.buf = binary.BigEndian.AppendUint16(b.buf, numRecords)
	b.buf = binary.BigEndian.AppendUint32(b.buf, uncompressedLen)
	b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(data)))
	b.buf = append(b.buf, data...)
	b.entries++
	b.records += int(numRecords)
	return nil
}

// TrackPublisher records the last publishing id of the named publisher
// (publisher de-duplication) in the chunk's trailer. Call it once per
// publisher reference per batch, with the highest publishing id in the
// batch. Log.PublisherSequence returns it from Append on, and after a
// restart.
func (b *Batch) TrackPublisher(ref string, seq uint64) error {
	if len(ref) > 255 {
		return ErrRefTooLong
	}
	b.trailer = appendTrackSeq(b.trailer, ref, 0, seq)
	b.seqPos = append(b.seqPos, len(b.trailer)-16)
	b.seqRefs = append(b.seqRefs, ref)
	b.seqVals = append(b.seqVals, seq)
	return nil
}

// TrackOffset records a consumer's offset under its reference (store
// offset). Offsets go into a tracking chunk that Append writes after the
// user chunk, in the same write.
func (b *Batch) TrackOffset(ref string, offset uint64) error {
	if len(ref) > 255 {
		return ErrRefTooLong
	}
	b.offsets = appendTrackOffset(b.offsets, ref, offset)
	b.offRefs = append(b.offRefs, ref)
	b.offVals = append(b.offVals, offset)
	return nil
}

// sealFiltered builds the whole user chunk with a bloom filter of size
// bytes into dst (the data moves to make room for the filter).
func (b *Batch) sealFiltered(dst []byte, size int, chunkID uint64, ts int64, epoch uint64) []byte {
	dst = append(dst[:0], make([]byte, HeaderSize+size)...)
	bloom := dst[HeaderSize:]
	for _, h := range b.filters {
		bloomSet(bloom, h)
	}
	if len(b.filters) < b.records {
		bloomSet(bloom, emptyHash)
	}
	dst = append(dst, b.buf[HeaderSize:]...)
	for _, p := range b.seqPos {
		binary.BigEndian.PutUint64(b.trailer[p:], chunkID)
	}
	data := dst[HeaderSize+size:]
	h := Header{
		Type:       ChunkUser,
		NumEntries: uint16(b.entries),
		NumRecords: uint32(b.records),
		Timestamp:  ts,
		Epoch:      epoch,
		ChunkID:    chunkID,
		CRC:        crc32.ChecksumIEEE(data),
		DataLen:    uint32(len(data)),
		TrailerLen: uint32(len(b.trailer)),
		BloomSize:  uint8(size),
	}
	h.put(dst)
	h.Check = headerCheck(dst, dst[HeaderSize:HeaderSize+size], b.trailer)
	h.put(dst)
	return dst
}

// seal fills the user chunk's header and trailer chunk ids; it returns the
// bytes of the whole chunk (header, data, trailer).
func (b *Batch) seal(chunkID uint64, ts int64, epoch uint64) []byte {
	data := b.buf[HeaderSize:]
	h := Header{
		Type:       ChunkUser,
		NumEntries: uint16(b.entries),
		NumRecords: uint32(b.records),
		Timestamp:  ts,
		Epoch:      epoch,
		ChunkID:    chunkID,
		CRC:        crc32.ChecksumIEEE(data),
		DataLen:    uint32(len(data)),
		TrailerLen: uint32(len(b.trailer)),
	}
	for _, p := range b.seqPos {
		binary.BigEndian.PutUint64(b.trailer[p:], chunkID)
	}
	h.put(b.buf)
	h.Check = headerCheck(b.buf, nil, b.trailer)
	h.put(b.buf)
	return b.buf
}

// buildTracking appends a tracking chunk of type typ holding data to dst.
// A tracking delta has one entry and one record: it takes one offset, as in
// osiris, so chunk ids stay unique. A snapshot, which opens every rolled
// segment, has none, so that rolling leaves no gap in offsets; its id is
// that of the chunk after it.
func buildTracking(dst []byte, typ ChunkType, data []byte, chunkID uint64, ts int64, epoch uint64) []byte {
	var n uint32 = 1
	if typ == ChunkTrackingSnapshot {
		n = 0
	}
	h := Header{
		Type:       typ,
		NumEntries: uint16(n),
		NumRecords: n,
		Timestamp:  ts,
		Epoch:      epoch,
		ChunkID:    chunkID,
		CRC:        crc32.ChecksumIEEE(data),
		DataLen:    uint32(len(data)),
	}
	at := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	h.put(dst[at:])
	h.Check = headerCheck(dst[at:], nil, nil)
	h.put(dst[at:])
	return append(dst, data...)
}
