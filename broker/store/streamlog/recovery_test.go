package streamlog

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func TestTrackingRecovered(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"one-segment", Options{}},
		{"snapshots", Options{MaxSegmentBytes: 1500}},
		{"snapshots-retention", Options{MaxSegmentBytes: 1500, MaxBytes: 4000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, tc.opts)
			b := NewBatch()
			for i := 0; i < 200; i++ {
				b.Reset()
				if err := b.AddSimple(msg(i, 20)); err != nil {
					t.Fatal(err)
				}
				if err := b.TrackPublisher("p1", uint64(i*10)); err != nil {
					t.Fatal(err)
				}
				if i%3 == 0 {
					b.TrackPublisher("p2", uint64(i))
				}
				if i%7 == 0 {
					b.TrackOffset("consumer-a", uint64(i))
				}
				if _, err := l.Append(b, nil); err != nil {
					t.Fatal(err)
				}
			}
			// Tracking without entries: a tracking chunk of its own.
			b.Reset()
			b.TrackPublisher("p3", 42)
			if _, err := l.Append(b, nil); err != nil {
				t.Fatal(err)
			}
			if err := l.StoreOffset("consumer-b", 123, nil); err != nil {
				t.Fatal(err)
			}
			want := map[string]uint64{"p1": 1990, "p2": 198, "p3": 42}
			wantOff := map[string]uint64{"consumer-a": 196, "consumer-b": 123}
			check := func(l *Log) {
				t.Helper()
				for ref, v := range want {
					if got, ok := l.PublisherSequence(ref); !ok || got != v {
						t.Errorf("PublisherSequence(%s) = %d, %v; want %d", ref, got, ok, v)
					}
				}
				for ref, v := range wantOff {
					if got, ok := l.QueryOffset(ref); !ok || got != v {
						t.Errorf("QueryOffset(%s) = %d, %v; want %d", ref, got, ok, v)
					}
				}
				if _, ok := l.QueryOffset("nobody"); ok {
					t.Error("offset for an unknown reference")
				}
			}
			check(l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, tc.opts)
			check(l)
			// Tracking chunks are invisible to consumers.
			_, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
			for i := 1; i < len(seqs); i++ {
				if seqs[i] != seqs[i-1]+1 {
					t.Fatalf("records out of order at %d: %d after %d", i, seqs[i], seqs[i-1])
				}
			}
			if seqs[len(seqs)-1] != 199 {
				t.Fatalf("last record %d", seqs[len(seqs)-1])
			}
			l.Close()
		})
	}
}

// lastChunkPos returns the position of the last chunk of the only segment.
func lastChunkPos(t *testing.T, seg []byte) int {
	t.Helper()
	p, last := FileHeaderSize, -1
	for p < len(seg) {
		_, n, err := ParseChunk(seg[p:])
		if err != nil {
			t.Fatalf("valid log does not parse at %d: %v", p, err)
		}
		last = p
		p += n
	}
	return last
}

// TestTornTail cuts or garbles the last chunk at every byte position and
// checks that recovery keeps exactly the chunks before it, that the log
// takes appends again, and that the lost chunk's offsets are reused
// (it was never confirmed nor read).
func TestTornTail(t *testing.T) {
	src := t.TempDir()
	l := openLog(t, src, Options{})
	appendChunks(t, l, 0, 5, 3, 20)
	b := NewBatch()
	b.AddSimple(msg(15, 20))
	b.AddSubBatch(CompressionNone, 2, 48, append(append([]byte{0, 0, 0, 20}, msg(16, 20)...), append([]byte{0, 0, 0, 20}, msg(17, 20)...)...))
	b.TrackPublisher("pub", 99)
	if _, err := l.Append(b, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segFile := filepath.Join(src, segName(0))
	good, err := os.ReadFile(segFile)
	if err != nil {
		t.Fatal(err)
	}
	cut := lastChunkPos(t, good)
	rng := rand.New(rand.NewPCG(1, 2))

	check := func(t *testing.T, seg []byte, wantRecords int, wantPub bool) {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segName(0)), seg, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		_, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
		if len(seqs) != wantRecords {
			t.Fatalf("recovered %d records, want %d", len(seqs), wantRecords)
		}
		if _, ok := l.PublisherSequence("pub"); ok != wantPub {
			t.Fatalf("publisher sequence recovered = %v, want %v", ok, wantPub)
		}
		ids := appendChunks(t, l, wantRecords, 1, 1, 20)
		if ids[0] != uint64(wantRecords) {
			t.Fatalf("next chunk id %d, want %d", ids[0], wantRecords)
		}
		_, seqs = readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
		for i, s := range seqs {
			if s != i {
				t.Fatalf("after recovery and append, record %d is %d", i, s)
			}
		}
		st, _ := os.Stat(filepath.Join(dir, idxName(0)))
		if st.Size() != FileHeaderSize+int64(l.Stats().Segments*0+countChunks(t, l))*IndexRecordSize {
			t.Fatalf("index size %d", st.Size())
		}
	}
	t.Run("truncate", func(t *testing.T) {
		for p := cut; p < len(good); p++ {
			check(t, good[:p], 15, false)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		for p := cut; p < len(good); p++ {
			seg := bytes.Clone(good[:p])
			for i := 0; i < len(good)-p+rng.IntN(100); i++ {
				seg = append(seg, byte(rng.Uint32()))
			}
			check(t, seg, 15, false)
		}
	})
	t.Run("flipped-byte", func(t *testing.T) {
		// A flipped byte anywhere in the last chunk's header or data; the
		// trailer is not covered by the CRC, only by its structure.
		h, _, _ := ParseChunk(good[cut:])
		for p := cut; p < cut+int(h.DataStart()+int64(h.DataLen)); p++ {
			if p >= cut+32 && p < cut+36 {
				continue // the CRC field: flipping it is caught too, but skip the tautology
			}
			seg := bytes.Clone(good)
			seg[p] ^= 0x40
			check(t, seg, 15, false)
		}
	})
	t.Run("garbage-after-whole-chunk", func(t *testing.T) {
		seg := append(bytes.Clone(good), 0x51, 0, 0, 1, 7)
		check(t, seg, 18, true)
	})
	t.Run("missing-index", func(t *testing.T) {
		check(t, good, 18, true)
	})
}

func countChunks(t *testing.T, l *Log) int {
	t.Helper()
	r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{Tracking: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		c, err := r.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			return n
		}
		n++
	}
}

// A sealed segment whose index is torn (a crash while the syncer wrote it)
// gets its index rebuilt.
func TestSealedIndexRebuilt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxSegmentBytes: 2000})
	appendChunks(t, l, 0, 60, 2, 30)
	l.Close()
	idx := filepath.Join(dir, idxName(0))
	st, _ := os.Stat(idx)
	if err := os.Truncate(idx, st.Size()-IndexRecordSize-5); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, idxName(segmentBases(t, dir)[1])))
	l = openLog(t, dir, Options{MaxSegmentBytes: 2000})
	defer l.Close()
	if st2, _ := os.Stat(idx); st2.Size() != st.Size() {
		t.Fatalf("index rebuilt to %d bytes, was %d", st2.Size(), st.Size())
	}
	for _, off := range []uint64{0, 31, 59, 60, 61, 119} {
		if got := firstOffset(t, l, OffsetSpec{Kind: OffsetAbsolute, Offset: off}); got != int64(off&^1) {
			t.Fatalf("offset %d: chunk %d", off, got)
		}
	}
}

func segmentBases(t *testing.T, dir string) []uint64 {
	var out []uint64
	for _, f := range segmentFiles(t, dir) {
		var b uint64
		for _, c := range filepath.Base(f)[:20] {
			b = b*10 + uint64(c-'0')
		}
		out = append(out, b)
	}
	return out
}

// A segment file torn while being created (shorter than its header) is
// repaired, whether it is the only one or follows others.
func TestTornSegmentHeader(t *testing.T) {
	for _, size := range []int{0, 3, FileHeaderSize - 1} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segName(0)), []byte("OSIL\x00\x00\x00\x01")[:size], 0o644); err != nil {
			t.Fatal(err)
		}
		l := openLog(t, dir, Options{})
		appendChunks(t, l, 0, 3, 1, 10)
		l.Close()
		l = openLog(t, dir, Options{})
		if _, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{}); len(seqs) != 3 {
			t.Fatalf("size %d: read %d records", size, len(seqs))
		}
		l.Close()
	}
}

// Recovery reads tracking state from the last segment only (every rolled
// segment opens with a snapshot), not from the whole log, and rolling
// leaves no gap in offsets.
func TestRecoveryReadsOnlyTheTail(t *testing.T) {
	for _, tracking := range []bool{false, true} {
		dir := t.TempDir()
		l := openLog(t, dir, Options{MaxSegmentBytes: 2000})
		if tracking {
			l.StoreOffset("c", 5, nil)
		}
		appendChunks(t, l, 0, 200, 1, 100)
		l.Close()
		l = openLog(t, dir, Options{MaxSegmentBytes: 2000})
		if l.Stats().Segments < 10 || l.trackingScans != 0 {
			t.Fatalf("tracking %v: %d segments, %d scanned for tracking", tracking, l.Stats().Segments, l.trackingScans)
		}
		if got, ok := l.QueryOffset("c"); ok != tracking || (ok && got != 5) {
			t.Fatalf("offset %d %v", got, ok)
		}
		offs, _ := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
		first := offs[0]
		for i, o := range offs {
			if o != first+uint64(i) {
				t.Fatalf("offset gap: record %d at %d", i, o)
			}
		}
		l.Close()
	}
}
