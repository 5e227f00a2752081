package logstore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// FuzzDecodeRecord: any bytes decode to a record or an error, never a panic
// or an allocation beyond the input; what decodes re-encodes to the same
// bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendLogRecord(nil, "q", &raft.Log{Index: 7, Term: 2, Type: raft.LogCommand, Data: []byte("hello"), Extensions: []byte("x"), AppendedAt: time.Unix(1, 2)}))
	f.Add(appendDeleteRecord(nil, "meta", 1, 99))
	f.Add(appendDropRecord(nil, "q/gone"))
	mv := appendLogRecord(nil, "q", &raft.Log{Index: 3, Term: 1, Data: []byte("moved")})
	asMove(mv)
	f.Add(mv)
	f.Add(appendStableRecord(nil, "g", []byte("CurrentTerm"), []byte{1, 0, 0, 0, 0, 0, 0, 0}))
	b := appendStableRecord(nil, "g", []byte("k"), nil)
	markCommit(b, 0)
	f.Add(b)
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, n, err := decodeRecord(b)
		if err != nil {
			return
		}
		var again []byte
		switch rec.kind {
		case kindLog:
			var l raft.Log
			rec.toLog(&l)
			again = appendLogRecord(nil, string(rec.group), &l)
		case kindMove:
			var l raft.Log
			rec.toLog(&l)
			again = appendLogRecord(nil, string(rec.group), &l)
			asMove(again)
		case kindDrop:
			again = appendDropRecord(nil, string(rec.group))
		case kindDelete:
			again = appendDeleteRecord(nil, string(rec.group), rec.min, rec.max)
		case kindStable:
			again = appendStableRecord(nil, string(rec.group), rec.key, rec.val)
		}
		if rec.commit {
			markCommit(again, 0)
		}
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("decoded %+v re-encodes to %x, read from %x", rec, again, b[:n])
		}
	})
}

// FuzzOpenSegment: any bytes after a segment header open to a store or an
// error (a torn tail cut, ErrCorrupt), never a panic; what opens serves
// every entry it indexed. (No append here: an fdatasync per input would
// make `make test-fuzz` slow; the recovery tests append after a cut.)
func FuzzOpenSegment(f *testing.F) {
	var seed []byte
	seed = appendLogRecord(seed, "q", &raft.Log{Index: 1, Term: 1, Data: []byte("a")})
	seed = appendLogRecord(seed, "q", &raft.Log{Index: 2, Term: 1, Data: []byte("b")})
	seed = appendDeleteRecord(seed, "q", 1, 1)
	seed = appendStableRecord(seed, "q", []byte("CurrentTerm"), []byte{2, 0, 0, 0, 0, 0, 0, 0})
	markCommit(seed, len(seed)-len(appendStableRecord(nil, "q", []byte("CurrentTerm"), []byte{2, 0, 0, 0, 0, 0, 0, 0})))
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	base := f.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "logstore-fuzz"); err == nil { // recovery logic, not the disk: no fsync cost
		base = shm
		f.Cleanup(func() { _ = os.RemoveAll(shm) })
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir, err := os.MkdirTemp(base, "case")
		must(t, err)
		defer os.RemoveAll(dir)
		must(t, os.WriteFile(filepath.Join(dir, "0000000000000001"+segmentExt), append([]byte(segmentMagic), b...), 0o644))
		s, err := Open(context.Background(), dir, Options{})
		if err != nil {
			return
		}
		defer s.Close()
		g := s.Group("q")
		first, err := g.FirstIndex()
		must(t, err)
		last, err := g.LastIndex()
		must(t, err)
		for i := first; i <= last && first > 0; i++ {
			var l raft.Log
			must(t, g.GetLog(i, &l))
		}
	})
}
