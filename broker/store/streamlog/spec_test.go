package streamlog

import (
	"testing"
	"time"
)

// firstOffset returns the offset of the first record a reader at spec
// yields, or -1 if none is there yet.
func firstOffset(t *testing.T, l *Log, spec OffsetSpec) int64 {
	t.Helper()
	r, err := l.NewReader(spec, ReaderOptions{})
	if err != nil {
		t.Fatalf("NewReader(%+v): %v", spec, err)
	}
	defer r.Close()
	c, err := r.TryNext()
	if err != nil {
		t.Fatalf("TryNext: %v", err)
	}
	if c == nil {
		return -1
	}
	return int64(c.Header.ChunkID)
}

func TestOffsetSpecs(t *testing.T) {
	clk := newTestClock()
	l := openLog(t, t.TempDir(), Options{MaxSegmentBytes: 2000, Now: clk.Now})
	defer l.Close()

	if got := firstOffset(t, l, OffsetSpec{Kind: OffsetFirst}); got != -1 {
		t.Fatalf("first on empty log = %d", got)
	}
	// 50 chunks of 4 records, one second apart: chunk k has timestamp
	// t0+k s; a tracking chunk (one offset) after chunk 10, and (since
	// there is tracking state) a tracking snapshot opening every later
	// segment, so ids have gaps.
	t0 := clk.Now().UnixMilli()
	var ids []uint64
	for k := 0; k < 50; k++ {
		ids = append(ids, appendChunks(t, l, k*4, 1, 4, 40)...)
		if k == 10 {
			if err := l.StoreOffset("c1", 17, nil); err != nil {
				t.Fatal(err)
			}
		}
		clk.Add(time.Second)
	}
	id := func(k int) int64 { return int64(ids[k]) }
	if ids[11] != 45 {
		t.Fatalf("chunk after the tracking chunk has id %d, want 45", ids[11])
	}
	if st := l.Stats(); st.Segments < 4 {
		t.Fatalf("segments %d", st.Segments)
	}
	for _, tc := range []struct {
		name string
		spec OffsetSpec
		want int64
	}{
		{"first", OffsetSpec{Kind: OffsetFirst}, 0},
		{"last", OffsetSpec{Kind: OffsetLast}, id(49)},
		{"next", OffsetSpec{Kind: OffsetNext}, -1},
		{"offset-0", OffsetSpec{Kind: OffsetAbsolute, Offset: 0}, 0},
		{"offset-chunk-start", OffsetSpec{Kind: OffsetAbsolute, Offset: 8}, 8},
		{"offset-mid-chunk", OffsetSpec{Kind: OffsetAbsolute, Offset: 10}, 8},
		{"offset-tracking", OffsetSpec{Kind: OffsetAbsolute, Offset: 44}, 45},
		{"offset-after-tracking", OffsetSpec{Kind: OffsetAbsolute, Offset: 47}, 45},
		{"offset-late", OffsetSpec{Kind: OffsetAbsolute, Offset: uint64(id(49)) + 3}, id(49)},
		{"offset-past-end", OffsetSpec{Kind: OffsetAbsolute, Offset: 10_000}, -1},
		{"timestamp-before", OffsetSpec{Kind: OffsetTimestamp, Timestamp: t0 - 1000}, 0},
		{"timestamp-exact", OffsetSpec{Kind: OffsetTimestamp, Timestamp: t0 + 20_000}, id(20)},
		{"timestamp-between", OffsetSpec{Kind: OffsetTimestamp, Timestamp: t0 + 30_500}, id(31)},
		{"timestamp-future", OffsetSpec{Kind: OffsetTimestamp, Timestamp: t0 + 100_000}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := firstOffset(t, l, tc.spec); got != tc.want {
				t.Fatalf("first chunk = %d, want %d", got, tc.want)
			}
		})
	}

	// A reader at next gets exactly the chunks appended after it started.
	r, err := l.NewReader(OffsetSpec{Kind: OffsetNext}, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	more := appendChunks(t, l, 1000, 1, 2, 10)
	c, err := r.TryNext()
	if err != nil || c == nil || c.Header.ChunkID != more[0] {
		t.Fatalf("next reader got %v, %v; want chunk %d", c, err, more[0])
	}
}

func TestOffsetSpecsAfterRetention(t *testing.T) {
	clk := newTestClock()
	l := openLog(t, t.TempDir(), Options{MaxSegmentBytes: 1000, MaxBytes: 3000, Now: clk.Now})
	defer l.Close()
	appendChunks(t, l, 0, 100, 2, 40)
	st := l.Stats()
	if st.FirstOffset <= 0 {
		t.Fatalf("retention removed nothing: %+v", st)
	}
	for _, spec := range []OffsetSpec{
		{Kind: OffsetFirst},
		{Kind: OffsetAbsolute, Offset: 0},
		{Kind: OffsetAbsolute, Offset: uint64(st.FirstOffset) - 1},
		{Kind: OffsetTimestamp, Timestamp: 0},
	} {
		if got := firstOffset(t, l, spec); got != st.FirstOffset {
			t.Fatalf("%+v: first chunk %d, want %d", spec, got, st.FirstOffset)
		}
	}
}
