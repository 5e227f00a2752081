package streamlog

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestAgainstModel runs random appends (batches of simple entries and
// sub-batches, publisher sequences, consumer offsets, filter values),
// retention by size, reopens and reads (every offset spec, read-ahead on
// and off, file sections) against a plain in-memory model of the log.
func TestAgainstModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			runModel(t, seed)
		})
	}
}

type modelRecord struct {
	offset uint64
	seq    uint64
	ts     int64
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed*7))
	clk := newTestClock()
	dir := t.TempDir()
	opts := Options{MaxSegmentBytes: int64(1000 + rng.IntN(4000)), Now: clk.Now}
	if seed%2 == 0 {
		opts.MaxBytes = 20_000
	}
	l := openLog(t, dir, opts)
	defer func() { l.Close() }()

	var model []modelRecord // every record ever appended, in offset order
	writers := map[string]uint64{}
	offsets := map[string]uint64{}
	var seq uint64
	b := NewBatch()
	for step := 0; step < 400; step++ {
		clk.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
		switch op := rng.IntN(20); {
		case op < 14: // append a batch
			b.Reset()
			var recs []uint64
			for e := 0; e < 1+rng.IntN(8); e++ {
				m := make([]byte, 8+rng.IntN(60))
				switch rng.IntN(3) {
				case 0:
					binary.BigEndian.PutUint64(m, seq)
					recs = append(recs, seq)
					seq++
					b.AddSimple(m)
				case 1:
					binary.BigEndian.PutUint64(m, seq)
					recs = append(recs, seq)
					seq++
					b.AddFiltered(m, fmt.Sprint("f", rng.IntN(3)))
				default:
					var inner []byte
					n := 1 + rng.IntN(4)
					for i := 0; i < n; i++ {
						inner = binary.BigEndian.AppendUint32(inner, 8)
						inner = binary.BigEndian.AppendUint64(inner, seq)
						recs = append(recs, seq)
						seq++
					}
					b.AddSubBatch(CompressionNone, uint16(n), uint32(len(inner)), inner)
				}
			}
			if rng.IntN(3) == 0 {
				ref := fmt.Sprint("p", rng.IntN(3))
				b.TrackPublisher(ref, seq)
				writers[ref] = seq
			}
			if rng.IntN(5) == 0 {
				ref := fmt.Sprint("c", rng.IntN(3))
				v := uint64(rng.IntN(1000))
				b.TrackOffset(ref, v)
				offsets[ref] = v
			}
			id, err := l.Append(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range recs {
				model = append(model, modelRecord{offset: id + uint64(i), seq: s, ts: clk.Now().UnixMilli()})
			}
		case op < 16: // store an offset alone
			ref := fmt.Sprint("c", rng.IntN(3))
			v := uint64(rng.IntN(1000))
			if err := l.StoreOffset(ref, v, nil); err != nil {
				t.Fatal(err)
			}
			offsets[ref] = v
		case op < 17: // reopen
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, opts)
		default: // read and compare
			waitDurable(t, l)
			checkModel(t, l, rng, model)
		}
	}
	waitDurable(t, l)
	checkModel(t, l, rng, model)
	for ref, v := range writers {
		if got, ok := l.PublisherSequence(ref); !ok || got != v {
			t.Fatalf("publisher %s: %d %v, want %d", ref, got, ok, v)
		}
	}
	for ref, v := range offsets {
		if got, ok := l.QueryOffset(ref); !ok || got != v {
			t.Fatalf("offset %s: %d %v, want %d", ref, got, ok, v)
		}
	}
}

func waitDurable(t *testing.T, l *Log) {
	t.Helper()
	done := make(chan error, 1)
	if err := l.StoreOffset("sync", 0, func(_ uint64, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// checkModel reads from a random spec and compares with the model's
// records still in the log.
func checkModel(t *testing.T, l *Log, rng *rand.Rand, model []modelRecord) {
	t.Helper()
	st := l.Stats()
	// Records still in the log: those at or after the first offset.
	live := model
	for len(live) > 0 && int64(live[0].offset) < st.FirstOffset {
		live = live[1:]
	}
	if len(live) == 0 {
		return
	}
	var spec OffsetSpec
	from := 0 // index into live of the first record the reader must yield
	switch rng.IntN(4) {
	case 0:
		spec = OffsetSpec{Kind: OffsetFirst}
	case 1:
		from = rng.IntN(len(live))
		spec = OffsetSpec{Kind: OffsetAbsolute, Offset: live[from].offset}
	case 2:
		from = rng.IntN(len(live))
		spec = OffsetSpec{Kind: OffsetTimestamp, Timestamp: live[from].ts}
		for from > 0 && live[from-1].ts >= spec.Timestamp {
			from--
		}
	case 3:
		spec = OffsetSpec{Kind: OffsetLast}
		from = -1
	}
	ropts := ReaderOptions{ReadAhead: NewReadAhead(rng.IntN(2) == 0, 64+rng.IntN(4096)), FileSections: rng.IntN(2) == 0}
	r, err := l.NewReader(spec, ropts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []modelRecord
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		c, err := r.Next(ctx)
		cancel()
		if err != nil {
			break
		}
		data := c.Data()
		if !c.InMemory() {
			f, off, n := c.DataSection()
			data = make([]byte, n)
			if _, err := f.ReadAt(data, off); err != nil {
				t.Fatal(err)
			}
		}
		it := IterEntries(data, c.Header.ChunkID)
		for o, m, ok := it.Next(); ok; o, m, ok = it.Next() {
			got = append(got, modelRecord{offset: o, seq: binary.BigEndian.Uint64(m), ts: c.Header.Timestamp})
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	if from < 0 { // last: the reader starts at the last chunk
		if len(got) == 0 || got[len(got)-1] != live[len(live)-1] {
			t.Fatalf("last: got %v, log ends with %v", got, live[len(live)-1])
		}
		return
	}
	// Readers start at a chunk boundary at or before the wanted record.
	for len(got) > 0 && got[0].offset < live[from].offset {
		got = got[1:]
	}
	want := live[from:]
	if len(got) != len(want) {
		t.Fatalf("spec %+v (%+v): got %d records, want %d", spec, ropts, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("spec %+v: record %d is %+v, want %+v", spec, i, got[i], want[i])
		}
	}
}
