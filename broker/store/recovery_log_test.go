package store

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest/damage"
	"github.com/warrenmq/warren/broker/brokertest/logcapture"
)

// TestRecoveryRepairsAreLoggedAndMinimal damages real files written by the
// store — one flipped byte, a cut tail — and reopens them: each repair is
// logged at warn naming the file and what was dropped, and only the
// damaged message is lost (a flipped byte in the message store costs one
// message, not every later one in its file).
func TestRecoveryRepairsAreLoggedAndMinimal(t *testing.T) {
	const n = 300
	tests := []struct {
		name   string
		size   int                                                  // message size: 6000 goes to the message store
		damage func(t *testing.T, dir string, q *QueueIndex) string // returns the damaged file
		lost   []uint64                                             // seqs that must not come back
		warns  []string                                             // substrings of the warn messages expected
	}{
		{
			name: "flipped body byte in the message store",
			size: 6000,
			damage: func(t *testing.T, dir string, q *QueueIndex) string {
				f := rdqFile(t, dir)
				damage.FlipByte(t, f, 150*(msgHeader+6000)+msgHeader+100)
				return f
			},
			lost:  []uint64{150},
			warns: []string{"message store: skipped corrupt records", "queue index: dropped entries whose message is not in the message store"},
		},
		{
			name: "cut message store tail",
			size: 6000,
			damage: func(t *testing.T, dir string, q *QueueIndex) string {
				f := rdqFile(t, dir)
				damage.CutTail(t, f, 3000)
				return f
			},
			lost:  []uint64{299},
			warns: []string{"message store: cut a torn or corrupt tail", "queue index: dropped entries whose message is not in the message store"},
		},
		{
			name: "flipped body byte in a queue segment",
			size: 100,
			damage: func(t *testing.T, dir string, q *QueueIndex) string {
				damage.FlipByte(t, q.segPath(0, "qs"), 150*100+50)
				return q.segPath(0, "qi")
			},
			lost:  []uint64{150},
			warns: []string{"queue index: dropped torn or corrupt entries"},
		},
		{
			name: "flipped status byte in a queue segment",
			size: 100,
			damage: func(t *testing.T, dir string, q *QueueIndex) string {
				damage.FlipByte(t, q.segPath(0, "qi"), 150*entrySize) // 1 -> 0x41
				return q.segPath(0, "qi")
			},
			lost:  []uint64{150},
			warns: []string{"queue index: dropped torn or corrupt entries"},
		},
		{
			name: "cut queue segment",
			size: 100,
			damage: func(t *testing.T, dir string, q *QueueIndex) string {
				damage.CutTail(t, q.segPath(0, "qi"), entrySize+10)
				return q.segPath(0, "qi")
			},
			lost:  []uint64{298, 299},
			warns: []string{"queue index: ignored a torn entry"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Version: 2, EmbedBelow: 4096}
			v := openVhost(t, dir)
			q, _ := openQueue(t, v, "damaged", opts)
			for seq := uint64(0); seq < n; seq++ {
				if err := q.Append([]Entry{{Seq: seq, ID: MsgID(seq + 1), Persistent: true, Data: body(seq, tt.size)}}); err != nil {
					t.Fatal(err)
				}
			}
			syncNow(t, q)
			q.closeFiles() // crash
			_ = v.Close()
			file := tt.damage(t, dir, q)

			logs, log := logcapture.New()
			v, err := OpenVhost(context.Background(), VhostConfig{Dir: dir, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			q, rec := openQueue(t, v, "damaged", opts)
			v.RecoveryDone()
			got := readAll(t, q)
			lost := map[uint64]bool{}
			for _, s := range tt.lost {
				lost[s] = true
			}
			if len(got) != n-len(tt.lost) || rec.Count != len(got) {
				t.Fatalf("recovered %d messages (count %d), want %d: only the damaged one(s) %v lost", len(got), rec.Count, n-len(tt.lost), tt.lost)
			}
			for _, e := range got {
				if lost[e.Seq] || !bytes.Equal(e.Data, body(e.Seq, tt.size)) {
					t.Fatalf("seq %d came back (damaged: %v) with intact data: %v", e.Seq, lost[e.Seq], bytes.Equal(e.Data, body(e.Seq, tt.size)))
				}
			}
			// The first warn expected is the repair of the damaged file,
			// and names it.
			warns := logs.Lines(slog.LevelWarn)
			for i, want := range tt.warns {
				found := false
				for _, l := range warns {
					if strings.Contains(l.Msg, want) {
						found = true
						if i == 0 && l.Attrs["file"] != file {
							t.Errorf("warn %q names file %q, want %s", l.Msg, l.Attrs["file"], file)
						}
					}
				}
				if !found {
					t.Errorf("no warn %q; logged: %v", want, warns)
				}
			}
			for _, l := range warns {
				if l.Attrs["file"] == "" || (l.Attrs["records"] == "" && l.Attrs["entries"] == "" && l.Attrs["bytes_dropped"] == "" && l.Attrs["bytes"] == "") {
					t.Errorf("warn %v does not say which file and how much was dropped", l)
				}
			}
			_ = q.Close(true)
		})
	}
}

func rdqFile(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "msg_store", "*.rdq"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			return f
		}
	}
	t.Fatal("no message store file")
	return ""
}
