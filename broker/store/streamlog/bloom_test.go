package streamlog

import (
	"fmt"
	"testing"
)

func TestFilterValues(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxSegmentBytes: 4000})
	defer l.Close()
	// Chunk k holds 5 messages with filter value "v<k%4>", every third
	// chunk also one unfiltered message, every fifth chunk has no filter.
	b := NewBatch()
	type chunkInfo struct {
		value      string
		unfiltered bool
		filtered   bool
	}
	var chunks []chunkInfo
	for k := 0; k < 60; k++ {
		b.Reset()
		ci := chunkInfo{value: fmt.Sprintf("v%d", k%4)}
		if k%5 == 0 {
			for m := 0; m < 5; m++ {
				b.AddSimple(msg(m, 10))
			}
			ci.unfiltered = true
		} else {
			ci.filtered = true
			for m := 0; m < 5; m++ {
				if err := b.AddFiltered(msg(m, 10), ci.value); err != nil {
					t.Fatal(err)
				}
			}
			if k%3 == 0 {
				b.AddSimple(msg(9, 10))
				ci.unfiltered = true
			}
		}
		if _, err := l.Append(b, nil); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, ci)
	}
	appendChunks(t, l, 0, 1, 1, 1) // wait for durability
	chunks = append(chunks, chunkInfo{unfiltered: true})

	for _, tc := range []struct {
		name   string
		filter Filter
	}{
		{"v1", Filter{Values: []string{"v1"}}},
		{"v1-v2", Filter{Values: []string{"v1", "v2"}}},
		{"v3-unfiltered", Filter{Values: []string{"v3"}, MatchUnfiltered: true}},
		{"unfiltered", Filter{MatchUnfiltered: true}},
		{"absent", Filter{Values: []string{"nope"}}},
	} {
		for _, ra := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/readahead=%v", tc.name, ra), func(t *testing.T) {
				r, err := l.NewReader(OffsetSpec{Kind: OffsetFirst}, ReaderOptions{Filter: &tc.filter, ReadAhead: NewReadAhead(ra, 4096)})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				got := 0
				for {
					c, err := r.TryNext()
					if err != nil {
						t.Fatal(err)
					}
					if c == nil {
						break
					}
					got++
				}
				// Every wanted chunk comes; a bloom filter may let a few
				// others through, but with 16 bytes and one value per
				// chunk, most are skipped.
				want := 0
				for _, ci := range chunks {
					ok := tc.filter.MatchUnfiltered && ci.unfiltered
					for _, v := range tc.filter.Values {
						ok = ok || (ci.filtered && ci.value == v)
					}
					if ok {
						want++
					}
				}
				st := r.Stats()
				if got < want || got > want+len(chunks)/10 || st.Skipped != int64(len(chunks)-got) {
					t.Fatalf("got %d chunks, want %d (skipped %d of %d)", got, want, st.Skipped, len(chunks))
				}
			})
		}
	}
	// Filtered chunks survive recovery (their check covers the filter).
	l.Close()
	l2 := openLog(t, dir, Options{MaxSegmentBytes: 4000})
	defer l2.Close()
	records := 1
	for k := 0; k < 60; k++ {
		records += 5
		if k%5 != 0 && k%3 == 0 {
			records++
		}
	}
	_, seqs := readAll(t, l2, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
	if len(seqs) != records || l2.Stats().LastOffset != int64(records-1) {
		t.Fatalf("recovered %d records, want %d (%+v)", len(seqs), records, l2.Stats())
	}
}
