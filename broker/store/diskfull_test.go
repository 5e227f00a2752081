package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest/tmpfs"
)

// TestProbeDiskFullAppendIsAllOrNothing fills a real filesystem (a small
// tmpfs: no reserved blocks, ENOSPC is real) with appends of large
// (message store) and small (embedded) messages. A batch that finds the
// disk full fails with ENOSPC and leaves nothing behind — not in Read, not
// after a crash — while the disk alarm is raised at once; once space is
// freed, appends work again without reopening anything.
func TestProbeDiskFullAppendIsAllOrNothing(t *testing.T) {
	for _, opts := range []Options{
		{Version: 2, EmbedBelow: 4096, SegmentEntries: 256},
		{Version: 1, EmbedBelow: 4096, SegmentEntries: 256},
	} {
		t.Run(map[int]string{1: "v1", 2: "v2"}[opts.Version], func(t *testing.T) {
			mnt := tmpfs.Mount(t, 4<<20)
			filler := filepath.Join(mnt, "filler")
			tmpfs.Fill(t, filler, 1<<20)
			dir := filepath.Join(mnt, "vhost")
			var raised atomic.Int32
			disk := NewDiskWatch(mnt, 0, func(alarm bool) {
				if alarm {
					raised.Add(1)
				}
			})
			open := func() *VhostStore {
				v, err := OpenVhost(context.Background(), VhostConfig{Dir: dir, Disk: disk})
				if err != nil {
					t.Fatalf("OpenVhost: %v", err)
				}
				return v
			}
			v := open()
			q, _ := openQueue(t, v, "q", opts)

			var stored []Entry // what Append accepted, in order
			seq := uint64(0)
			// Batches alternate: mixed (half in the message store), and
			// all embedded (only the queue's own files), so both writers
			// meet the full disk.
			var small, large int // stored entries of each kind
			appendBatch := func(mixed bool) error {
				var batch []Entry
				for i := 0; i < 8; i++ {
					size := 100
					if mixed && i%2 == 0 {
						size = 6000 // message store
					}
					batch = append(batch, Entry{Seq: seq, ID: MsgID(seq + 1), Persistent: true, Data: body(seq, size)})
					seq++
				}
				err := q.Append(batch)
				if err == nil {
					stored = append(stored, batch...)
					for _, e := range batch {
						if len(e.Data) >= opts.EmbedBelow {
							large++
						} else {
							small++
						}
					}
				}
				return err
			}
			failures := map[bool]int{}
			for b := 0; (failures[true] < 3 || failures[false] < 3) && b < 100000; b++ {
				if err := appendBatch(b%2 == 0); err != nil {
					if !IsNoSpace(err) {
						t.Fatalf("append failed with %v, want ENOSPC", err)
					}
					failures[b%2 == 0]++
				}
			}
			if failures[true] == 0 || failures[false] == 0 {
				t.Fatalf("the disk never filled (failures: mixed %d, embedded %d)", failures[true], failures[false])
			}
			if raised.Load() == 0 || !disk.Alarm() {
				t.Fatal("a write found the disk full and the disk alarm was not raised")
			}
			check := func(q *QueueIndex, what string) {
				t.Helper()
				got := readAll(t, q)
				if len(got) != len(stored) {
					t.Fatalf("%s: read %d entries, want the %d stored", what, len(got), len(stored))
				}
				for i, e := range got {
					if e.Seq != stored[i].Seq || !bytes.Equal(e.Data, stored[i].Data) || e.Redelivered {
						t.Fatalf("%s: entry %d is seq %d (redelivered %v), want seq %d intact and not redelivered", what, i, e.Seq, e.Redelivered, stored[i].Seq)
					}
				}
			}
			check(q, "on the full disk")
			n := len(stored)

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			disk.Sample()
			if disk.Alarm() {
				t.Fatal("the alarm stayed raised with space free again")
			}
			for i := 0; i < 10; i++ {
				if err := appendBatch(i%2 == 0); err != nil {
					t.Fatalf("append after space came back: %v", err)
				}
			}
			syncNow(t, q)
			check(q, "after space came back")
			if len(stored) != n+80 {
				t.Fatalf("%d stored, want %d", len(stored), n+80)
			}

			q.closeFiles() // crash
			_ = v.Close()
			v = open()
			defer v.Close()
			q, rec := openQueue(t, v, "q", opts)
			v.RecoveryDone()
			if rec.Count != len(stored) {
				t.Fatalf("recovered %d entries, want %d", rec.Count, len(stored))
			}
			check(q, "after a crash")
			_, _, _, msgs := v.msgs.Stats()
			if msgs != large {
				t.Fatalf("message store holds %d messages, want the %d stored", msgs, large)
			}
			t.Logf("%d entries stored (%d in the message store); %d mixed and %d embedded batches failed with ENOSPC", len(stored), large, failures[true], failures[false])
			_ = q.Close(true)
		})
	}
}

// A v1 journal flush that a full disk stops halfway can be retried: the
// entries it placed in segments are the segments' (counted once, never
// placed twice), and one of them acked after space came back stays acked
// after the next flush and a crash.
func TestProbeDiskFullJournalFlushRetry(t *testing.T) {
	mnt := tmpfs.Mount(t, 4<<20)
	dir := filepath.Join(mnt, "vhost")
	opts := Options{Version: 1, EmbedBelow: 4096, SegmentEntries: 256}
	v, err := OpenVhost(context.Background(), VhostConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := openQueue(t, v, "q", opts)
	var batch []Entry
	for seq := uint64(0); seq < 10; seq++ {
		batch = append(batch, Entry{Seq: seq, ID: MsgID(seq + 1), Persistent: true, Data: body(seq, 100)})
	}
	if err := q.Append(batch); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack([]uint64{5}); err != nil { // a hole: the flush writes 0-4 before it places 6
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	tmpfs.Fill(t, filler, -1)
	if err := q.flushJournal(); !IsNoSpace(err) {
		t.Fatalf("journal flush on a full disk: %v, want ENOSPC", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack([]uint64{2}); err != nil {
		t.Fatalf("ack once space is back: %v", err)
	}
	if err := q.flushJournal(); err != nil {
		t.Fatalf("journal flush once space is back: %v", err)
	}
	if q.live != 8 {
		t.Fatalf("queue counts %d live entries, want 8", q.live)
	}
	syncNow(t, q)
	q.closeFiles() // crash
	_ = v.Close()

	v, err = OpenVhost(context.Background(), VhostConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	q, _ = openQueue(t, v, "q", opts)
	v.RecoveryDone()
	var got []uint64
	for _, e := range readAll(t, q) {
		got = append(got, e.Seq)
	}
	if fmt.Sprint(got) != "[0 1 3 4 6 7 8 9]" {
		t.Fatalf("after a crash the queue has %v, want [0 1 3 4 6 7 8 9] (2 and 5 acked, nothing twice)", got)
	}
}
