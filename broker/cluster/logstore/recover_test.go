package logstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// writeBatches writes group q's entries 1..n, one batch each, and returns
// the only segment's path and the offset where each entry's record starts.
func writeBatches(t *testing.T, dir string, n uint64) (string, []int64) {
	t.Helper()
	s := open(t, dir, Options{})
	g := s.Group("q")
	offs := []int64{0} // entry i at offs[i]
	for i := uint64(1); i <= n; i++ {
		segs := segments(t, dir)
		st, err := os.Stat(segs[len(segs)-1])
		must(t, err)
		offs = append(offs, st.Size())
		must(t, g.StoreLog(entries("q", i, i, 1)[0]))
	}
	must(t, s.Close())
	segs := segments(t, dir)
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	return segs[0], offs
}

// Cutting the file at every byte of the last record loses that record
// only: the earlier ones stay, the cut is logged, and appends go on.
func TestTornTailIsCutAndEarlierRecordsKept(t *testing.T) {
	base := t.TempDir()
	seg, offs := writeBatches(t, base, 4)
	st, err := os.Stat(seg)
	must(t, err)
	for cut := offs[4]; cut < st.Size(); cut++ {
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) {
			dir := copyDir(t, base)
			must(t, os.Truncate(segments(t, dir)[0], cut))
			var logs bytes.Buffer
			s, err := Open(context.Background(), dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			must(t, err)
			defer s.Close()
			checkLog(t, s, "q", 1, 3)
			if cut > offs[4] && !strings.Contains(logs.String(), "torn tail") {
				t.Fatalf("no warning about the cut tail; log: %s", logs.String())
			}
			must(t, s.Group("q").StoreLog(entries("q", 4, 4, 2)[0]))
			must(t, s.Close())
			checkLog(t, open(t, dir, Options{}), "q", 1, 4)
		})
	}
}

// A flipped byte in a record that complete batches follow is damage to
// acknowledged entries: Open refuses, naming the file and offset.
func TestFlippedByteInAMiddleRecordRefusesToOpen(t *testing.T) {
	base := t.TempDir()
	seg, offs := writeBatches(t, base, 4)
	for at := offs[2]; at < offs[3]; at++ {
		t.Run(fmt.Sprintf("byte=%d", at), func(t *testing.T) {
			dir := copyDir(t, base)
			path := segments(t, dir)[0]
			b, err := os.ReadFile(path)
			must(t, err)
			b[at] ^= 0x10
			must(t, os.WriteFile(path, b, 0o644))
			_, err = Open(context.Background(), dir, Options{})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want ErrCorrupt", err)
			}
			if want := fmt.Sprintf("%s at offset %d", path, offs[2]); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
		})
	}
	_ = seg
}

// A crash while a new segment was being created leaves it shorter than its
// header: Open writes the header again and keeps everything before it.
func TestTornSegmentHeaderIsRewritten(t *testing.T) {
	for _, size := range []int{0, 3, len(segmentMagic) - 1} {
		t.Run(fmt.Sprintf("bytes=%d", size), func(t *testing.T) {
			dir := t.TempDir()
			writeBatches(t, dir, 3)
			must(t, os.WriteFile(filepath.Join(dir, "0000000000000002"+segmentExt), []byte(segmentMagic)[:size], 0o644))
			s := open(t, dir, Options{})
			checkLog(t, s, "q", 1, 3)
			must(t, s.Group("q").StoreLog(entries("q", 4, 4, 1)[0]))
			must(t, s.Close())
			checkLog(t, open(t, dir, Options{}), "q", 1, 4)
		})
	}
}

// GetLog checks the record's CRC: damage after Open is an error, not
// wrong data handed to raft.
func TestGetLogDetectsDamageOnDisk(t *testing.T) {
	dir := t.TempDir()
	seg, offs := writeBatches(t, dir, 3)
	s := open(t, dir, Options{})
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte{0xff}, offs[2]+headerLen+10)
	must(t, err)
	var l raft.Log
	if err := s.Group("q").GetLog(2, &l); err == nil || !strings.Contains(err.Error(), "crc32c") {
		t.Fatalf("GetLog of a damaged record = %v (data %q), want a CRC error", err, l.Data)
	}
	must(t, s.Group("q").GetLog(3, &l))
}
