package streamlog

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// readChunks reads n chunks and reports how many were in memory.
func readChunks(t *testing.T, r *Reader, n int) (inMemory int) {
	t.Helper()
	for i := 0; i < n; i++ {
		c, err := r.TryNext()
		if err != nil || c == nil {
			t.Fatalf("chunk %d: %v, %v", i, c, err)
		}
		if c.InMemory() {
			inMemory++
		}
	}
	return inMemory
}

func TestReadAheadSmallChunks(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	const chunks = 1000
	appendChunks(t, l, 0, chunks, 1, 12) // 48 + 4 + 12 = 64 bytes each
	const chunkSize = 64
	total := chunks * chunkSize
	for _, tc := range []struct {
		name      string
		opts      ReaderOptions
		wantReads int64
		wantMem   int
	}{
		// One read of 4096 bytes serves 64 chunks.
		{"on-4096", ReaderOptions{}, int64((total + 4095) / 4096), chunks},
		{"on-4096-sections", ReaderOptions{FileSections: true}, int64((total + 4095) / 4096), chunks},
		{"on-1000", ReaderOptions{ReadAhead: NewReadAhead(true, 1000)}, int64((total + 959) / 960), chunks},
		// Off: a header read and a data read per chunk...
		{"off", ReaderOptions{ReadAhead: NewReadAhead(false, 4096)}, 2 * chunks, chunks},
		// ...or a header read and a file section.
		{"off-sections", ReaderOptions{ReadAhead: NewReadAhead(false, 4096), FileSections: true}, chunks, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if mem := readChunks(t, r, chunks); mem != tc.wantMem {
				t.Fatalf("%d chunks in memory, want %d", mem, tc.wantMem)
			}
			if st := r.Stats(); st.Reads != tc.wantReads {
				t.Fatalf("reads = %d, want %d (stats %+v)", st.Reads, tc.wantReads, st)
			}
		})
	}
}

// largeAndSmallLog is a log of 40 one-record chunks: records of 5000 bytes
// (over the default read-ahead limit) at even offsets, 12 bytes at odd.
func largeAndSmallLog(t *testing.T) *Log {
	t.Helper()
	l := openLog(t, t.TempDir(), Options{})
	t.Cleanup(func() { l.Close() })
	for i := 0; i < 20; i++ {
		appendChunks(t, l, 2*i, 1, 1, 5000)
		appendChunks(t, l, 2*i+1, 1, 1, 12)
	}
	return l
}

func TestNoReadAheadOfLargeChunks(t *testing.T) {
	l := largeAndSmallLog(t)
	r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{FileSections: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 40; i++ {
		c, err := r.TryNext()
		if err != nil || c == nil {
			t.Fatalf("chunk %d: %v %v", i, c, err)
		}
		large := i%2 == 0
		if c.InMemory() == large {
			t.Fatalf("chunk %d (large %v) in memory = %v", i, large, c.InMemory())
		}
		f, off, n := c.DataSection()
		data := make([]byte, n)
		if _, err := f.ReadAt(data, off); err != nil {
			t.Fatal(err)
		}
		it := IterEntries(data, c.Header.ChunkID)
		if o, m, ok := it.Next(); !ok || o != uint64(i) || len(m) != map[bool]int{true: 5000, false: 12}[large] {
			t.Fatalf("chunk %d: record %d of %d bytes", i, o, len(m))
		}
	}
	// The first read (limit bytes at chunk 0) holds only part of that
	// large chunk: it goes out as a file section, and the next read starts
	// at the small chunk after it. That read of limit bytes brings the small
	// chunk and the next large chunk's header, so each pair costs one read
	// after the first. Large chunks are never read (only their header), and
	// nothing after them comes with them.
	if st := r.Stats(); st.Reads != 21 || st.BytesRead != 20*4096+64 {
		t.Fatalf("reads = %d of %d bytes, want 21 of 20*4096+64 (the last read ends at the log end)", st.Reads, st.BytesRead)
	}
}

// A chunk just over the read-ahead limit is read into memory (no file
// sections, or sections only from a larger size) without reading its first
// bytes twice: what the read-ahead brought is kept and one read fetches the
// rest, so every byte of the log is read once.
func TestChunksOverTheLimitReadOnce(t *testing.T) {
	l := largeAndSmallLog(t)
	for _, tc := range []struct {
		name string
		opts ReaderOptions
	}{
		{"memory", ReaderOptions{}},
		{"sections-from-64k", ReaderOptions{FileSections: true, SectionMin: 64 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var total int64
			for i := 0; i < 40; i++ {
				c, err := r.TryNext()
				if err != nil || c == nil {
					t.Fatalf("chunk %d: %v %v", i, c, err)
				}
				if !c.InMemory() {
					t.Fatalf("chunk %d of %d bytes handed out as a file section", i, c.Header.Size())
				}
				total += c.Header.Size()
				it := c.Entries()
				if o, m, ok := it.Next(); !ok || o != uint64(i) || string(m) != string(msg(i, map[bool]int{true: 5000, false: 12}[i%2 == 0])) {
					t.Fatalf("chunk %d: record %d of %d bytes is not the one written", i, o, len(m))
				}
			}
			// Per large chunk: the read-ahead read that reached it and
			// one read of its rest; the last small chunk: one read.
			if st := r.Stats(); st.BytesRead != total || st.Reads != 41 {
				t.Fatalf("read %d bytes in %d reads, want %d (the log, once) in 41", st.BytesRead, st.Reads, total)
			}
		})
	}
}

// The setting is shared and read at every read: turning it off and on
// while reading changes how the next chunks are read.
func TestReadAheadChangedAtRuntime(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	appendChunks(t, l, 0, 300, 1, 12)
	ra := NewReadAhead(true, 4096)
	r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{ReadAhead: ra, FileSections: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readChunks(t, r, 64) // exactly one buffer
	if st := r.Stats(); st.Reads != 1 {
		t.Fatalf("reads %d", st.Reads)
	}
	ra.Set(false, 4096)
	if mem := readChunks(t, r, 100); mem != 0 {
		t.Fatalf("%d chunks in memory with read-ahead off", mem)
	}
	if st := r.Stats(); st.Reads != 101 {
		t.Fatalf("reads %d, want 101", st.Reads)
	}
	ra.Set(true, 2048)
	readChunks(t, r, 128)
	if st := r.Stats(); st.Reads != 105 {
		t.Fatalf("reads %d, want 105", st.Reads)
	}
	if on, limit := ra.Get(); !on || limit != 2048 {
		t.Fatalf("Get = %v %d", on, limit)
	}
}

func TestWireForm(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	b := NewBatch()
	b.AddSimple([]byte("hello"))
	b.TrackPublisher("p", 1)
	l.Append(b, nil)
	appendChunks(t, l, 0, 1, 1, 12)
	r, _ := l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
	defer r.Close()
	c, err := r.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := c.Wire()
	// What rabbitmq-stream-go-client reads: magic/version, type, entries,
	// records, timestamp, epoch, first offset, crc, data length, trailer
	// length, 4 bytes (bloom size + reserved), then data length bytes.
	if len(w) != HeaderSize+9 || w[0] != 0x51 || w[1] != 0 || binary.BigEndian.Uint16(w[2:]) != 1 ||
		binary.BigEndian.Uint32(w[4:]) != 1 || binary.BigEndian.Uint64(w[24:]) != 0 ||
		binary.BigEndian.Uint32(w[36:]) != 9 || binary.BigEndian.Uint32(w[40:]) != 19 ||
		crc32.ChecksumIEEE(w[HeaderSize:]) != binary.BigEndian.Uint32(w[32:]) ||
		string(w[HeaderSize+4:]) != "hello" {
		t.Fatalf("wire form % x", w)
	}
	if c.Header.Timestamp != int64(binary.BigEndian.Uint64(w[8:])) {
		t.Fatal("timestamp")
	}
}

// Chunks of the read-ahead limit or more are read the same way with
// read-ahead on and off (the limit's bytes or the header first, then the
// rest, or a file section from SectionMin): the same number of reads of the
// same bytes, so the setting cannot change how fast such a stream is read.
// (A chunk that goes out as a file section costs read-ahead on the limit's
// 4 KiB where off reads its 48-byte header: under 1% of such a chunk.)
func TestLargeChunksReadAlikeOnAndOff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		per, size int // messages per chunk, message size
	}{
		{"12Bx384", 384, 12},
		{"512Bx8", 8, 512},
		{"1024Bx4", 4, 1024},
		{"1024Bx64", 64, 1024},
		{"1024Bx384", 384, 1024},
		{"600000Bx1", 1, 600_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openLog(t, t.TempDir(), Options{})
			defer l.Close()
			const chunks = 20
			appendChunks(t, l, 0, chunks, tc.per, tc.size)
			for _, opts := range []struct {
				name string
				opts ReaderOptions
			}{
				{"memory", ReaderOptions{}},
				{"sections-from-512k", ReaderOptions{FileSections: true, SectionMin: 512 << 10}},
			} {
				stats := map[bool]ReaderStats{}
				mem := map[bool]int{}
				for _, on := range []bool{false, true} {
					o := opts.opts
					o.ReadAhead = NewReadAhead(on, 4096)
					r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, o)
					if err != nil {
						t.Fatal(err)
					}
					mem[on] = readChunks(t, r, chunks)
					stats[on] = r.Stats()
					r.Close()
				}
				off, on := stats[false], stats[true]
				extra := int64(chunks-mem[false]) * (4096 - HeaderSize) // per file section
				if on.Reads != off.Reads || on.BytesRead != off.BytesRead+extra || mem[true] != mem[false] {
					t.Fatalf("%s: read-ahead on made %d reads of %d bytes (%d chunks in memory), off %d reads of %d bytes (%d)",
						opts.name, on.Reads, on.BytesRead, mem[true], off.Reads, off.BytesRead, mem[false])
				}
				// A header read per chunk, and one more per chunk read
				// into memory.
				if want := int64(chunks + mem[false]); off.Reads != want {
					t.Fatalf("%s: %d reads for %d chunks (%d in memory), want %d", opts.name, off.Reads, chunks, mem[false], want)
				}
			}
		})
	}
}
