package logstore

import (
	"bytes"
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
