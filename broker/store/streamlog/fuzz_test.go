package streamlog

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"testing"
)

// seedChunks returns valid stored chunks of each kind.
func seedChunks() [][]byte {
	var out [][]byte
	b := NewBatch()
	b.AddSimple([]byte("hello"))
	b.AddSimple(nil)
	out = append(out, bytes.Clone(append(b.seal(7, 1700000000000, 3), b.trailer...)))

	b.Reset()
	inner := binary.BigEndian.AppendUint32(nil, 3)
	inner = append(inner, "abc"...)
	inner = binary.BigEndian.AppendUint32(inner, 1)
	inner = append(inner, 'x')
	b.AddSubBatch(CompressionNone, 2, uint32(len(inner)), inner)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(inner)
	zw.Close()
	b.AddSubBatch(CompressionGzip, 2, uint32(len(inner)), z.Bytes())
	b.AddSubBatch(CompressionZstd, 5, 10, []byte("0123456789"))
	b.TrackPublisher("publisher-1", 99)
	out = append(out, bytes.Clone(append(b.seal(100, 1, 1), b.trailer...)))

	b.Reset()
	b.AddFiltered([]byte("filtered"), "red")
	b.AddSimple([]byte("plain"))
	out = append(out, bytes.Clone(append(b.sealFiltered(nil, 16, 3, 4, 5), b.trailer...)))

	data := appendTrackOffset(nil, "consumer", 12)
	data = appendTrackSeq(data, "p", 1, 2)
	out = append(out, buildTracking(nil, ChunkTrackingDelta, data, 5, 9, 0))
	out = append(out, buildTracking(nil, ChunkTrackingSnapshot, data, 6, 9, 0))
	return out
}

// FuzzChunk feeds arbitrary bytes to the chunk parser and the entry
// iterator: they must never panic, and a chunk that parses must iterate
// to exactly its record count (records in unsupported compressions are
// skipped with their offsets).
func FuzzChunk(f *testing.F) {
	for _, c := range seedChunks() {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := ParseChunk(b)
		// Entries must be safe on anything, even unparsed data.
		it := IterEntries(b, 0)
		for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
		}
		if err != nil {
			return
		}
		if int64(n) != h.Size() || n > len(b) {
			t.Fatalf("size %d, header says %d, input %d", n, h.Size(), len(b))
		}
		if h.Type != ChunkUser {
			return
		}
		c := Chunk{Header: h, raw: b[:n]}
		it = c.Entries()
		last := h.ChunkID
		count := 0
		for o, _, ok := it.Next(); ok; o, _, ok = it.Next() {
			if o < last || o >= h.NextOffset() {
				t.Fatalf("offset %d outside chunk [%d, %d)", o, h.ChunkID, h.NextOffset())
			}
			last = o
			count++
		}
		if it.Err() == nil && count != int(h.NumRecords) {
			t.Fatalf("iterated %d records, header says %d", count, h.NumRecords)
		}
	})
}

func TestSeedChunksParse(t *testing.T) {
	for i, c := range seedChunks() {
		h, n, err := ParseChunk(c)
		if err != nil || n != len(c) {
			t.Fatalf("seed %d: %v (%d of %d bytes)", i, err, n, len(c))
		}
		if i == 1 {
			ch := Chunk{Header: h, raw: c}
			it := ch.Entries()
			var got []string
			var offs []uint64
			for o, m, ok := it.Next(); ok; o, m, ok = it.Next() {
				got = append(got, string(m))
				offs = append(offs, o)
			}
			if len(got) != 4 || got[0] != "abc" || got[3] != "x" || offs[3] != 103 || it.Err() != ErrUnsupportedCompression {
				t.Fatalf("entries %q at %v, err %v", got, offs, it.Err())
			}
		}
	}
}
