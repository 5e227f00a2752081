package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestV1JournalFlushAndCrash drives a version 1 index across journal
// flushes, acks entries on both sides of a flush, "crashes" (no clean
// close) and checks recovery replays the journal on top of the segments.
func TestV1JournalFlushAndCrash(t *testing.T) {
	dir := t.TempDir()
	v := openVhost(t, dir)
	opts := Options{Version: 1, EmbedBelow: 64}
	q, _ := openQueue(t, v, "v1", opts)
	v.RecoveryDone()
	const n = 20000 // crosses journalMaxRecords once
	var batch []Entry
	for seq := uint64(0); seq < n; seq++ {
		size := 20
		if seq%100 == 0 {
			size = 200 // message store
		}
		batch = append(batch, Entry{Seq: seq, ID: MsgID(seq + 1), Persistent: true, Data: body(seq, size)})
		if len(batch) == 500 {
			if err := q.Append(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "queues", "v1", "000000000000.qi")); err != nil {
		t.Fatalf("journal never flushed into a segment: %v", err)
	}
	var acks []uint64
	for seq := uint64(0); seq < n; seq += 2 {
		acks = append(acks, seq) // even ones: some in segments, some in the journal
	}
	if err := q.Ack(acks); err != nil {
		t.Fatal(err)
	}
	syncNow(t, q)
	if live, _ := q.Len(); live != n/2 {
		t.Fatalf("live = %d, want %d", live, n/2)
	}
	q.closeFiles() // crash
	_ = v.Close()

	v = openVhost(t, dir)
	defer v.Close()
	q, rec := openQueue(t, v, "v1", opts)
	v.RecoveryDone()
	got := readAll(t, q)
	if len(got) != n/2 || rec.Count != n/2 {
		t.Fatalf("recovered %d entries (rec.Count %d), want %d", len(got), rec.Count, n/2)
	}
	for i, e := range got {
		want := uint64(2*i + 1)
		if e.Seq != want || !bytes.Equal(e.Data, body(want, len(e.Data))) || e.Redelivered {
			t.Fatalf("entry %d: seq %d (want %d) redelivered=%v (never delivered)", i, e.Seq, want, e.Redelivered)
		}
	}
	_, _, _, msgs := v.msgs.Stats()
	if msgs != 0 {
		t.Fatalf("message store holds %d messages; every large one (seq %% 100 == 0) was acked", msgs)
	}
	if err := q.Close(true); err != nil {
		t.Fatal(err)
	}
}
