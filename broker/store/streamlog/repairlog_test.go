package streamlog

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest/damage"
	"github.com/warrenmq/warren/broker/brokertest/logcapture"
)

// TestRecoveryRepairsAreLogged damages a real stream's segments — a cut or
// flipped byte in the active segment, a flipped byte in a sealed one — and
// reopens it: the repair is logged at warn with the file and the bytes
// dropped, and every chunk before the damage is still read.
func TestRecoveryRepairsAreLogged(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, segs []string) string // returns the damaged file
		keep   int                                      // messages at least still read
	}{
		{"cut active segment tail", func(t *testing.T, segs []string) string {
			f := segs[len(segs)-1]
			st, _ := os.Stat(f)
			if err := os.Truncate(f, st.Size()-30); err != nil {
				t.Fatal(err)
			}
			return f
		}, 190},
		{"flipped byte in the active segment", func(t *testing.T, segs []string) string {
			f := segs[len(segs)-1]
			st, _ := os.Stat(f)
			damage.FlipByte(t, f, st.Size()-10)
			return f
		}, 190},
		{"flipped byte in a sealed segment, index cut", func(t *testing.T, segs []string) string {
			// A sealed segment is scanned when its index does not match it.
			f := segs[0]
			st, _ := os.Stat(f)
			damage.FlipByte(t, f, st.Size()-10)
			idx := f[:len(f)-len(".segment")] + ".index"
			ist, _ := os.Stat(idx)
			if err := os.Truncate(idx, ist.Size()-IndexRecordSize); err != nil {
				t.Fatal(err)
			}
			return f
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{MaxSegmentBytes: 4000}
			l := openLog(t, dir, opts)
			appendChunks(t, l, 0, 200, 1, 50)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			segs, _ := filepath.Glob(filepath.Join(dir, "*.segment"))
			if len(segs) < 2 {
				t.Fatalf("want several segments, got %d", len(segs))
			}
			file := tt.damage(t, segs)

			logs, log := logcapture.New()
			opts.Log = log
			l = openLog(t, dir, opts)
			defer l.Close()
			_, seqs := readAll(t, l, OffsetSpec{Kind: OffsetFirst}, ReaderOptions{})
			if len(seqs) < tt.keep || len(seqs) >= 200 {
				t.Fatalf("read %d messages after the repair, want at least %d and fewer than 200", len(seqs), tt.keep)
			}
			var found bool
			for _, line := range logs.Lines(slog.LevelWarn) {
				if line.Attrs["file"] == file && line.Attrs["bytes_dropped"] != "" && line.Attrs["bytes_dropped"] != "0" {
					found = true
				}
			}
			if !found {
				t.Fatalf("no warn naming %s and the bytes dropped; logged: %v", filepath.Base(file), fmt.Sprint(logs.Lines(slog.LevelDebug)))
			}
		})
	}
}
