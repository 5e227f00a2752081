package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func openVhost(t *testing.T, dir string) *VhostStore {
	t.Helper()
	v, err := OpenVhost(context.Background(), VhostConfig{Dir: dir})
	if err != nil {
		t.Fatalf("OpenVhost: %v", err)
	}
	return v
}

func openQueue(t *testing.T, v *VhostStore, name string, opts Options) (*QueueIndex, Recovery) {
	t.Helper()
	q, rec, err := v.OpenQueue(context.Background(), name, opts)
	if err != nil {
		t.Fatalf("OpenQueue: %v", err)
	}
	return q, rec
}

func body(seq uint64, size int) []byte {
	b := bytes.Repeat([]byte{byte(seq)}, size)
	copy(b, fmt.Sprintf("m%d|", seq))
	return b
}

func syncNow(t *testing.T, q *QueueIndex) {
	t.Helper()
	done := make(chan error, 1)
	q.Sync(context.Background(), func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func readAll(t *testing.T, q *QueueIndex) []Entry {
	t.Helper()
	var out []Entry
	if _, err := q.Read(0, 1<<30, 0, func(e Entry) { out = append(out, e) }); err != nil {
		t.Fatalf("Read: %v", err)
	}
	return out
}

func TestAppendAckReadRecover(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		size int
	}{
		{"v2 embedded", Options{Version: 2, EmbedBelow: 4096, SegmentEntries: 64}, 100},
		{"v2 message store", Options{Version: 2, EmbedBelow: 4096, SegmentEntries: 64}, 5000},
		{"v1 embedded", Options{Version: 1, EmbedBelow: 4096, SegmentEntries: 100}, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			v := openVhost(t, dir)
			q, rec := openQueue(t, v, "q/1", tt.opts)
			if rec.Count != 0 || rec.Next != 0 {
				t.Fatalf("fresh queue recovered %+v", rec)
			}
			var entries []Entry
			for seq := uint64(0); seq < 300; seq++ {
				entries = append(entries, Entry{Seq: seq, ID: MsgID(1000 + seq), Persistent: seq%10 != 9, Data: body(seq, tt.size)})
			}
			if err := q.Append(entries); err != nil {
				t.Fatalf("Append: %v", err)
			}
			var acks []uint64
			for seq := uint64(0); seq < 200; seq++ {
				acks = append(acks, seq)
			}
			if err := q.Ack(acks); err != nil {
				t.Fatalf("Ack: %v", err)
			}
			syncNow(t, q)
			got := readAll(t, q)
			if len(got) != 100 || got[0].Seq != 200 || !bytes.Equal(got[5].Data, body(205, tt.size)) {
				t.Fatalf("read %d entries, first %d", len(got), got[0].Seq)
			}
			// Crash: no clean close. Persistent ones come back, transient ones do not.
			if err := q.Flush(); err != nil {
				t.Fatal(err)
			}
			q.closeFiles()
			_ = v.Close()
			v = openVhost(t, dir)
			q, rec = openQueue(t, v, "q/1", tt.opts)
			v.RecoveryDone()
			got = readAll(t, q)
			want := 0
			for seq := 200; seq < 300; seq++ {
				if seq%10 != 9 {
					want++
				}
			}
			if len(got) != want || rec.Count != want || rec.Clean {
				t.Fatalf("recovered %d entries (rec %+v), want %d persistent", len(got), rec, want)
			}
			for _, e := range got {
				if !e.Persistent || !bytes.Equal(e.Data, body(e.Seq, tt.size)) {
					t.Fatalf("entry %d corrupt or transient after recovery", e.Seq)
				}
			}
			if rec.Next < 300 {
				t.Fatalf("Next %d would reuse seqs", rec.Next)
			}
			if err := q.Close(true); err != nil {
				t.Fatal(err)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFanoutStoredOnceAndFreed(t *testing.T) {
	dir := t.TempDir()
	v := openVhost(t, dir)
	defer v.Close()
	opts := Options{Version: 2, EmbedBelow: 1024}
	var qs []*QueueIndex
	for i := 0; i < 3; i++ {
		q, _ := openQueue(t, v, fmt.Sprintf("fan%d", i), opts)
		qs = append(qs, q)
	}
	v.RecoveryDone()
	data := body(7, 8000)
	for _, q := range qs {
		if err := q.Append([]Entry{{Seq: 0, ID: 42, Persistent: true, Data: data}}); err != nil {
			t.Fatal(err)
		}
		syncNow(t, q)
	}
	_, bytesOnDisk, _, n := v.msgs.Stats()
	if n != 1 || bytesOnDisk > int64(len(data))+100 {
		t.Fatalf("message store holds %d messages in %d bytes, want 1 copy", n, bytesOnDisk)
	}
	for i, q := range qs {
		if err := q.Ack([]uint64{0}); err != nil {
			t.Fatal(err)
		}
		_, _, _, n := v.msgs.Stats()
		if want := map[bool]int{true: 0, false: 1}[i == len(qs)-1]; n != want {
			t.Fatalf("after %d acks the store holds %d messages, want %d", i+1, n, want)
		}
	}
}

func TestTornTailIsCut(t *testing.T) {
	for _, size := range []int{50, 6000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			dir := t.TempDir()
			v := openVhost(t, dir)
			opts := Options{Version: 2, EmbedBelow: 4096}
			q, _ := openQueue(t, v, "torn", opts)
			for seq := uint64(0); seq < 10; seq++ {
				if err := q.Append([]Entry{{Seq: seq, ID: MsgID(seq + 1), Persistent: true, Data: body(seq, size)}}); err != nil {
					t.Fatal(err)
				}
			}
			syncNow(t, q)
			q.closeFiles()
			_ = v.Close()
			// Garble the tail of the body file (embedded) or of the message store.
			var victim string
			if size < 4096 {
				victim = filepath.Join(dir, "queues", "torn", "000000000000.qs")
			} else {
				matches, _ := filepath.Glob(filepath.Join(dir, "msg_store", "*.rdq"))
				victim = matches[len(matches)-1]
			}
			st, err := os.Stat(victim)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := os.OpenFile(victim, os.O_RDWR, 0)
			_, _ = f.WriteAt([]byte("garbage!"), st.Size()-8)
			f.Close()
			v = openVhost(t, dir)
			defer v.Close()
			q, rec := openQueue(t, v, "torn", opts)
			got := readAll(t, q)
			if len(got) != 9 || rec.Count != 9 {
				t.Fatalf("recovered %d entries (rec %d), want the 9 intact ones", len(got), rec.Count)
			}
			for _, e := range got {
				if !bytes.Equal(e.Data, body(e.Seq, size)) {
					t.Fatalf("entry %d served corrupt data", e.Seq)
				}
			}
		})
	}
}

func TestConvertBetweenVersions(t *testing.T) {
	dir := t.TempDir()
	v := openVhost(t, dir)
	defer v.Close()
	q, _ := openQueue(t, v, "conv", Options{Version: 2, EmbedBelow: 100})
	v.RecoveryDone()
	var entries []Entry
	for seq := uint64(0); seq < 5000; seq++ {
		size := 20
		if seq%3 == 0 {
			size = 300
		}
		entries = append(entries, Entry{Seq: seq, ID: MsgID(seq + 1), Persistent: true, Data: body(seq, size)})
	}
	if err := q.Append(entries); err != nil {
		t.Fatal(err)
	}
	syncNow(t, q)
	for _, ver := range []int{1, 2} {
		if err := q.Convert(context.Background(), Options{Version: ver, EmbedBelow: 100}); err != nil {
			t.Fatalf("convert to v%d: %v", ver, err)
		}
		if q.Version() != ver {
			t.Fatalf("version %d after converting to %d", q.Version(), ver)
		}
		got := readAll(t, q)
		if len(got) != len(entries) {
			t.Fatalf("v%d: %d entries after conversion, want %d", ver, len(got), len(entries))
		}
		for i, e := range got {
			if e.Seq != entries[i].Seq || !bytes.Equal(e.Data, entries[i].Data) {
				t.Fatalf("v%d: entry %d differs after conversion", ver, i)
			}
		}
	}
	_, _, _, n := v.msgs.Stats()
	if n != 1667 {
		t.Fatalf("message store holds %d messages after conversions, want 1667", n)
	}
}

func BenchmarkAppendSync100(b *testing.B) {
	v, err := OpenVhost(context.Background(), VhostConfig{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	q, _, err := v.OpenQueue(context.Background(), "bench", Options{Version: 2, EmbedBelow: 4096})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 100)
	batch := make([]Entry, 100)
	b.SetBytes(100 * 100)
	for i := 0; i < b.N; i++ {
		for j := range batch {
			seq := uint64(i*100 + j)
			batch[j] = Entry{Seq: seq, ID: MsgID(seq + 1), Persistent: true, Data: data}
		}
		if err := q.Append(batch); err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		q.Sync(context.Background(), func(err error) { done <- err })
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
