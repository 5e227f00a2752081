package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openFilesUnder counts this process's file descriptors open on files under dir.
func openFilesUnder(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) {
			n++
		}
	}
	return n
}

// A long queue keeps a bounded number of segment files open, whatever its
// number of segments, and still reads, acks and recovers every entry.
func TestLongQueueBoundsOpenFiles(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(map[int]string{1: "v1", 2: "v2"}[version], func(t *testing.T) {
			dir := t.TempDir()
			v := openVhost(t, dir)
			opts := Options{Version: version, EmbedBelow: 4096, SegmentEntries: 8}
			q, _ := openQueue(t, v, "long", opts)
			const total = 8 * 200 // 200 segments
			for seq := uint64(0); seq < total; seq += 50 {
				var batch []Entry
				for s := seq; s < seq+50; s++ {
					batch = append(batch, Entry{Seq: s, ID: MsgID(s + 1), Persistent: true, Data: body(s, 40)})
				}
				if err := q.Append(batch); err != nil {
					t.Fatalf("Append: %v", err)
				}
				syncNow(t, q)
			}
			// Two files per segment, plus the journal (v1) and the message store.
			limit := 2*maxOpenSegments + 2 + 4
			if n := openFilesUnder(t, dir); n > limit {
				t.Fatalf("%d files open under the store for %d segments, want at most %d", n, total/8, limit)
			}
			// Ack every other entry across all segments, then check the rest.
			var acks []uint64
			for s := uint64(0); s < total; s += 2 {
				acks = append(acks, s)
			}
			if err := q.Ack(acks); err != nil {
				t.Fatalf("Ack: %v", err)
			}
			syncNow(t, q)
			// Acks all over the queue open every segment until their fsync
			// is done; the queue's next turn (a Flush) closes them again.
			if err := q.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if n := openFilesUnder(t, dir); n > limit {
				t.Fatalf("%d files open after acks, want at most %d", n, limit)
			}
			check := func(q *QueueIndex) {
				t.Helper()
				got := readAll(t, q)
				if len(got) != total/2 {
					t.Fatalf("read %d entries, want %d", len(got), total/2)
				}
				for i, e := range got {
					want := uint64(2*i + 1)
					if e.Seq != want || string(e.Data) != string(body(want, 40)) {
						t.Fatalf("entry %d: seq %d data %q, want seq %d", i, e.Seq, e.Data[:8], want)
					}
				}
			}
			check(q)
			if err := q.Close(false); err != nil { // as after a crash: no clean marker
				t.Fatalf("Close: %v", err)
			}
			q2, rec := openQueue(t, v, "long", opts)
			defer q2.Close(true)
			if rec.Count != total/2 {
				t.Fatalf("recovered %d entries, want %d", rec.Count, total/2)
			}
			if n := openFilesUnder(t, dir); n > limit {
				t.Fatalf("%d files open after recovery, want at most %d", n, limit)
			}
			check(q2)
		})
	}
}

// Transient acks are counted at once and written in batches; message-store
// references of acked large messages are released by the time anything
// reads the segment, and a segment whose entries are all acked goes.
func TestAckTransient(t *testing.T) {
	dir := t.TempDir()
	v := openVhost(t, dir)
	q, _ := openQueue(t, v, "transient", Options{Version: 2, EmbedBelow: 64, SegmentEntries: 16})
	defer q.Close(true)
	const total = 48 // three segments
	var batch []Entry
	for s := uint64(0); s < total; s++ {
		size := 20
		if s%4 == 0 {
			size = 100 // in the message store
		}
		batch = append(batch, Entry{Seq: s, ID: MsgID(s + 1), Data: body(s, size)})
	}
	if err := q.Append(batch); err != nil {
		t.Fatalf("Append: %v", err)
	}
	// All of segment 0 and the even entries of segment 1.
	var acks []uint64
	for s := uint64(0); s < 16; s++ {
		acks = append(acks, s)
	}
	for s := uint64(16); s < 32; s += 2 {
		acks = append(acks, s)
	}
	if err := q.AckTransient(acks); err != nil {
		t.Fatalf("AckTransient: %v", err)
	}
	if n, _ := q.Len(); n != total-len(acks) {
		t.Fatalf("Len = %d, want %d", n, total-len(acks))
	}
	if _, err := os.Stat(q.segPath(0, "qi")); !os.IsNotExist(err) {
		t.Fatalf("segment 0 fully acked but still on disk (stat: %v)", err)
	}
	got := readAll(t, q)
	if len(got) != total-len(acks) {
		t.Fatalf("read %d entries, want %d", len(got), total-len(acks))
	}
	for _, e := range got {
		if e.Seq < 16 || e.Seq < 32 && e.Seq%2 == 0 {
			t.Fatalf("acked entry %d read back", e.Seq)
		}
	}
	for _, s := range acks {
		if s%4 == 0 && v.msgs.has(MsgID(s+1)) {
			t.Fatalf("message-store message of acked entry %d still referenced", s)
		}
	}
	for s := uint64(32); s < total; s += 4 {
		if !v.msgs.has(MsgID(s + 1)) {
			t.Fatalf("message-store message of live entry %d gone", s)
		}
	}
}
