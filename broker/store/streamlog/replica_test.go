package streamlog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// rawChunks reads every chunk of l (tracking chunks too) as stored.
func rawChunks(t *testing.T, l *Log) [][]byte {
	t.Helper()
	r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{Tracking: true, FileSections: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out [][]byte
	for {
		c, err := r.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			return out
		}
		if c.InMemory() {
			out = append(out, bytes.Clone(c.Bytes()))
			continue
		}
		f, off, n := c.Section()
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
}

// TestReplicaHoldsTheSameChunks: a log fed with AppendChunks what another
// log's Append built holds the same chunks, byte for byte (its own
// segments and snapshots aside), and the same tracking state, also after
// a reopen.
func TestReplicaHoldsTheSameChunks(t *testing.T) {
	clk := newTestClock()
	leader := openLog(t, t.TempDir(), Options{MaxSegmentBytes: 3000, Now: clk.Now})
	defer leader.Close()
	b := NewBatch()
	for i := 0; i < 120; i++ {
		b.Reset()
		for j := 0; j <= i%5; j++ {
			b.AddSimple(msg(i*10+j, 20+i%30))
		}
		if i%7 == 0 {
			b.AddFiltered(msg(i*10+9, 10), "f")
		}
		b.TrackPublisher(fmt.Sprint("p", i%3), uint64(i))
		if i%11 == 0 {
			b.TrackOffset("c", uint64(i))
		}
		if _, err := leader.Append(b, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitDurable(t, leader)
	chunks := rawChunks(t, leader)

	dir := t.TempDir()
	follower := openLog(t, dir, Options{MaxSegmentBytes: 2000})
	// Feed in groups of up to 5 chunks; a wrong first offset is refused.
	if _, err := follower.AppendChunks(chunks[1], nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("out-of-order chunk: %v", err)
	}
	garbled := bytes.Clone(chunks[0])
	garbled[len(garbled)-1] ^= 1
	if _, err := follower.AppendChunks(garbled, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbled chunk: %v", err)
	}
	durable := make(chan error, 1)
	for i := 0; i < len(chunks); i += 5 {
		var group []byte
		for _, c := range chunks[i:min(i+5, len(chunks))] {
			group = append(group, c...)
		}
		var done DoneFunc
		if i+5 >= len(chunks) {
			done = func(_ uint64, err error) { durable <- err }
		}
		if _, err := follower.AppendChunks(group, done); err != nil {
			t.Fatalf("group %d: %v", i, err)
		}
	}
	if err := <-durable; err != nil {
		t.Fatal(err)
	}
	check := func(follower *Log) {
		t.Helper()
		lo, ls := readAll(t, leader, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
		fo, fs := readAll(t, follower, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
		if fmt.Sprint(lo, ls) != fmt.Sprint(fo, fs) {
			t.Fatalf("follower records differ: %d vs %d", len(fs), len(ls))
		}
		for _, ref := range []string{"p0", "p1", "p2"} {
			a, _ := leader.PublisherSequence(ref)
			b, ok := follower.PublisherSequence(ref)
			if !ok || a != b {
				t.Fatalf("%s: leader %d follower %d", ref, a, b)
			}
		}
		if a, _ := leader.QueryOffset("c"); true {
			if b, ok := follower.QueryOffset("c"); !ok || a != b {
				t.Fatalf("offset: leader %d follower %d", a, b)
			}
		}
		// User chunks are the same bytes.
		var lu, fu [][]byte
		for _, c := range rawChunks(t, leader) {
			if c[1] == byte(ChunkUser) {
				lu = append(lu, c)
			}
		}
		for _, c := range rawChunks(t, follower) {
			if c[1] == byte(ChunkUser) {
				fu = append(fu, c)
			}
		}
		if len(lu) != len(fu) {
			t.Fatalf("%d user chunks, leader has %d", len(fu), len(lu))
		}
		for i := range lu {
			if !bytes.Equal(lu[i], fu[i]) {
				t.Fatalf("user chunk %d differs", i)
			}
		}
	}
	check(follower)
	if follower.Stats().Segments < 3 {
		t.Fatalf("follower did not roll: %+v", follower.Stats())
	}
	follower.Close()
	follower = openLog(t, dir, Options{MaxSegmentBytes: 2000})
	defer follower.Close()
	check(follower)
}
