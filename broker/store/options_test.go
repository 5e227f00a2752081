package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A new queue's options file is written without an fsync (the metadata
// makes the declare durable): a crash before the queue wrote anything may
// lose it, and the queue reopens with the options it is opened with; once
// the queue has written files, the layout it wrote them in is the one it
// reopens with, whatever the options say.
func TestOptionsFileOfNewQueue(t *testing.T) {
	v2 := Options{Version: 2, EmbedBelow: 4096, SegmentEntries: 64}
	v1 := Options{Version: 1, EmbedBelow: 4096, SegmentEntries: 64}
	crash := func(q *QueueIndex, v *VhostStore) {
		t.Helper()
		if err := q.Flush(); err != nil {
			t.Fatal(err)
		}
		q.closeFiles()
		_ = v.Close()
	}
	tests := []struct {
		name    string
		write   bool // the queue writes a message before the crash
		lose    bool // the crash leaves the options file empty
		wantVer int
	}{
		{"nothing written, options lost", false, true, 1},
		{"nothing written, options kept", false, false, 2},
		{"written", true, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			v := openVhost(t, dir)
			q, _ := openQueue(t, v, "q", v2)
			if tt.write {
				if err := q.Append([]Entry{{Seq: 0, ID: 1, Persistent: true, Data: body(0, 100)}}); err != nil {
					t.Fatal(err)
				}
				syncNow(t, q)
			}
			crash(q, v)
			if tt.lose {
				if err := os.Truncate(filepath.Join(v.queueDir("q"), optionsFile), 0); err != nil {
					t.Fatal(err)
				}
			}
			v = openVhost(t, dir)
			q, rec := openQueue(t, v, "q", v1)
			v.RecoveryDone()
			if q.Version() != tt.wantVer {
				t.Fatalf("reopened in layout %d, want %d", q.Version(), tt.wantVer)
			}
			if tt.write && (rec.Count != 1 || len(readAll(t, q)) != 1) {
				t.Fatalf("recovered %d messages, want 1", rec.Count)
			}
			if err := q.Close(true); err != nil {
				t.Fatal(err)
			}
			if got, ok := readOptions(v.queueDir("q")); !ok || got != tt.wantVer {
				t.Fatalf("options file says %d (%v) after a clean close, want %d", got, ok, tt.wantVer)
			}
			if err := v.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A new queue holds no file open until it writes (its options file is
// written and closed; fsynced before its first segment): a node with many
// idle queues does not run out of descriptors.
func TestEmptyQueuesHoldNoFileOpen(t *testing.T) {
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd here: %v", err)
		}
		return len(ents)
	}
	v := openVhost(t, t.TempDir())
	before := count()
	const n = 200
	for i := range n {
		openQueue(t, v, fmt.Sprintf("q%d", i), Options{Version: 2, EmbedBelow: 4096, SegmentEntries: 64})
	}
	if more := count() - before; more > n/10 {
		t.Fatalf("%d empty queues hold %d more file descriptors", n, more)
	}
}
