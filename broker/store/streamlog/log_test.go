package streamlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testClock is a settable clock for chunk timestamps and retention.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openLog(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// msg returns the test message for offset-independent sequence number i.
func msg(i int, size int) []byte {
	b := make([]byte, max(size, 8))
	binary.BigEndian.PutUint64(b, uint64(i))
	return b[:max(size, 8)]
}

// appendChunks appends n chunks of per messages each (numbered from
// start) and waits until all are durable; it returns their chunk ids.
func appendChunks(t testing.TB, l *Log, start, n, per, size int) []uint64 {
	t.Helper()
	b := NewBatch()
	ids := make([]uint64, 0, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for c := 0; c < n; c++ {
		b.Reset()
		for m := 0; m < per; m++ {
			if err := b.AddSimple(msg(start+c*per+m, size)); err != nil {
				t.Fatal(err)
			}
		}
		wg.Add(1)
		id, err := l.Append(b, func(_ uint64, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		ids = append(ids, id)
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("durable: %v", firstErr)
	}
	return ids
}

// readAll reads every user record from spec to the committed end.
func readAll(t testing.TB, l *Log, spec OffsetSpec, opts ReaderOptions) (offsets []uint64, seqs []int) {
	t.Helper()
	r, err := l.NewReader(spec, opts)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	defer r.Close()
	for {
		c, err := r.TryNext()
		if err != nil {
			t.Fatalf("TryNext: %v", err)
		}
		if c == nil {
			return
		}
		if !c.InMemory() {
			f, off, n := c.DataSection()
			data := make([]byte, n)
			if _, err := f.ReadAt(data, off); err != nil {
				t.Fatal(err)
			}
			it := IterEntries(data, c.Header.ChunkID)
			for o, m, ok := it.Next(); ok; o, m, ok = it.Next() {
				offsets = append(offsets, o)
				seqs = append(seqs, int(binary.BigEndian.Uint64(m)))
			}
			continue
		}
		it := c.Entries()
		for o, m, ok := it.Next(); ok; o, m, ok = it.Next() {
			offsets = append(offsets, o)
			seqs = append(seqs, int(binary.BigEndian.Uint64(m)))
		}
		if it.Err() != nil {
			t.Fatalf("entries: %v", it.Err())
		}
	}
}

func TestRoundTripManySegments(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts ReaderOptions
	}{
		{"readahead", ReaderOptions{}},
		{"readahead-off", ReaderOptions{ReadAhead: NewReadAhead(false, 4096)}},
		{"file-sections", ReaderOptions{FileSections: true}},
		{"file-sections-off", ReaderOptions{FileSections: true, ReadAhead: NewReadAhead(false, 4096)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, Options{MaxSegmentBytes: 10_000})
			defer l.Close()
			appendChunks(t, l, 0, 300, 3, 100)   // ~300*(48+3*104)=108KB: ~11 segments
			appendChunks(t, l, 900, 20, 1, 5000) // chunks above the read-ahead limit
			st := l.Stats()
			if st.Segments < 10 {
				t.Fatalf("segments = %d, want >= 10", st.Segments)
			}
			offs, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, tc.opts)
			if len(seqs) != 920 {
				t.Fatalf("read %d records, want 920", len(seqs))
			}
			for i := range seqs {
				if seqs[i] != i || offs[i] != uint64(i) {
					t.Fatalf("record %d: seq %d offset %d", i, seqs[i], offs[i])
				}
			}
			if st.LastOffset != 919 || st.CommittedChunkID != 919 || st.NextOffset != 920 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxSegmentBytes: 4096})
	appendChunks(t, l, 0, 100, 2, 50)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, Options{MaxSegmentBytes: 4096})
	defer l.Close()
	appendChunks(t, l, 200, 10, 2, 50)
	_, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
	if len(seqs) != 220 {
		t.Fatalf("read %d, want 220", len(seqs))
	}
	for i, s := range seqs {
		if s != i {
			t.Fatalf("record %d is %d", i, s)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.segment"))
	if len(files) < 3 {
		t.Fatalf("segments %v", files)
	}
}

func TestNotifyAtTail(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer l.Close()
	r, err := l.NewReader(OffsetSpec{Kind: OffsetNext}, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan uint64, 1)
	go func() {
		c, err := r.Next(context.Background())
		if err != nil {
			got <- 1 << 63
			return
		}
		got <- c.Header.ChunkID + uint64(c.Header.NumRecords)
	}()
	time.Sleep(20 * time.Millisecond)
	appendChunks(t, l, 0, 1, 5, 10)
	select {
	case n := <-got:
		if n != 5 {
			t.Fatalf("next offset after chunk %d", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reader not woken")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next at tail = %v", err)
	}
}

// Concurrent appenders and tailing readers: every reader sees every chunk
// once, in order, each appender's messages in its order.
func TestConcurrentAppendAndTail(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{MaxSegmentBytes: 8000})
	defer l.Close()
	const writers, perWriter = 4, 300
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		n   int
		err error
	}
	results := make(chan result, 3)
	for k := 0; k < 3; k++ {
		r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{FileSections: k == 1, ReadAhead: NewReadAhead(k != 2, 4096)})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer r.Close()
			last := make(map[uint64]uint64)
			n := 0
			next := uint64(0)
			for n < writers*perWriter {
				c, err := r.Next(ctx)
				if err != nil {
					results <- result{n, err}
					return
				}
				if c.Header.ChunkID != next {
					results <- result{n, fmt.Errorf("chunk %d, want %d", c.Header.ChunkID, next)}
					return
				}
				next = c.Header.NextOffset()
				f, off, size := c.DataSection()
				data := make([]byte, size)
				if _, err := f.ReadAt(data, off); err != nil {
					results <- result{n, err}
					return
				}
				it := IterEntries(data, c.Header.ChunkID)
				for _, m, ok := it.Next(); ok; _, m, ok = it.Next() {
					w, seq := binary.BigEndian.Uint64(m), binary.BigEndian.Uint64(m[8:])
					if seq != last[w] {
						results <- result{n, fmt.Errorf("writer %d: seq %d after %d", w, seq, last[w])}
						return
					}
					last[w] = seq + 1
					n++
				}
			}
			results <- result{n, nil}
		}()
	}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := NewBatch()
			for i := 0; i < perWriter; i++ {
				b.Reset()
				m := make([]byte, 16+i%50)
				binary.BigEndian.PutUint64(m, uint64(w))
				binary.BigEndian.PutUint64(m[8:], uint64(i))
				b.AddSimple(m)
				if _, err := l.Append(b, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for k := 0; k < 3; k++ {
		if r := <-results; r.err != nil || r.n != writers*perWriter {
			t.Fatalf("reader: %d records, %v", r.n, r.err)
		}
	}
}
