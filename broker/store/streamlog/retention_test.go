package streamlog

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.segment"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func dirBytes(t *testing.T, dir string) int64 {
	var n int64
	for _, f := range segmentFiles(t, dir) {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

func TestRetentionBySize(t *testing.T) {
	dir := t.TempDir()
	const maxBytes = 20_000
	l := openLog(t, dir, Options{MaxSegmentBytes: 4000, MaxBytes: maxBytes})
	defer l.Close()
	appendChunks(t, l, 0, 1000, 2, 30) // ~ 1000*(48+68) = 116 KB
	st := l.Stats()
	// Whole segments go: what is left is at most MaxBytes plus the active
	// segment, and at least MaxBytes minus one segment.
	if st.Bytes > maxBytes+4000 || st.Bytes < maxBytes-4000 {
		t.Fatalf("bytes after retention = %d (max %d)", st.Bytes, maxBytes)
	}
	if got := dirBytes(t, dir); got != st.Bytes {
		t.Fatalf("files hold %d bytes, stats say %d", got, st.Bytes)
	}
	if len(segmentFiles(t, dir)) != st.Segments {
		t.Fatalf("files %d, stats %d segments", len(segmentFiles(t, dir)), st.Segments)
	}
	// What is left reads back whole, from the first remaining offset on.
	offs, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
	if offs[0] != uint64(st.FirstOffset) || len(seqs) != 2000-int(st.FirstOffset) || seqs[len(seqs)-1] != 1999 {
		t.Fatalf("read %d records from %d, stats %+v", len(seqs), offs[0], st)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("gap at %d", i)
		}
	}
}

func TestRetentionByAge(t *testing.T) {
	clk := newTestClock()
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxSegmentBytes: 2000, MaxAge: time.Hour, Now: clk.Now})
	defer l.Close()
	appendChunks(t, l, 0, 100, 1, 100) // ~15 KB, ~8 segments, all "old"
	old := l.Stats()
	clk.Add(50 * time.Minute)
	appendChunks(t, l, 100, 100, 1, 100)
	l.ApplyRetention()
	if st := l.Stats(); st.FirstOffset != 0 {
		t.Fatalf("segments younger than max age were removed: %+v", st)
	}
	clk.Add(20 * time.Minute) // the first 100 are 70 min old, the rest 20
	l.ApplyRetention()
	st := l.Stats()
	if st.FirstOffset < old.LastOffset-20 || st.FirstOffset > old.LastOffset+1 {
		t.Fatalf("after age retention first offset = %d, old data ended at %d", st.FirstOffset, old.LastOffset)
	}
	// The active segment stays, however old.
	clk.Add(10 * time.Hour)
	l.ApplyRetention()
	st = l.Stats()
	if st.Segments != 1 || st.LastOffset != 199 {
		t.Fatalf("after everything expired: %+v", st)
	}
	_, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
	if len(seqs) == 0 || seqs[len(seqs)-1] != 199 {
		t.Fatalf("active segment not readable: %v", seqs)
	}
}

// A reader inside a segment that retention removes finishes it, then
// carries on with what is left.
func TestReaderSurvivesRetention(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxSegmentBytes: 2000, MaxBytes: 6000})
	defer l.Close()
	appendChunks(t, l, 0, 10, 1, 100)
	r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := r.TryNext()
	if err != nil || c == nil || c.Header.ChunkID != 0 {
		t.Fatalf("first chunk %v %v", c, err)
	}
	appendChunks(t, l, 10, 200, 1, 100)
	if l.Stats().FirstOffset < 50 {
		t.Fatal("retention did not run")
	}
	var last uint64
	n := 0
	for {
		c, err := r.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		if c.Header.ChunkID <= last {
			t.Fatalf("chunk %d after %d", c.Header.ChunkID, last)
		}
		last = c.Header.ChunkID
		n++
	}
	if last != 209 {
		t.Fatalf("reader ended at %d after %d chunks", last, n)
	}
}

// A log that stops growing still ages out: retention runs on a timer too.
func TestAgeRetentionWithoutAppends(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxSegmentBytes: 1000, MaxAge: time.Second})
	defer l.Close()
	appendChunks(t, l, 0, 30, 1, 100)
	if st := l.Stats(); st.Segments < 3 {
		t.Fatalf("segments %d", st.Segments)
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.Stats().Segments > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("old segments still there: %+v", l.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestOpenTwiceRefused(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("second Open of the same directory succeeded")
	}
	l.Close()
	l = openLog(t, dir, Options{})
	l.Close()
}
