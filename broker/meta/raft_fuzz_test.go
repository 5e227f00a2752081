package meta

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

// FuzzRaftApplyEntry: whatever bytes a log entry holds (a peer's forwarded
// write reaches the log after decodeEntry only), the state machine
// answers with an event or an error and never panics, and a refused entry
// changes nothing.
func FuzzRaftApplyEntry(f *testing.F) {
	for _, c := range []Command{
		{Op: OpPutVhost, Vhost: &Vhost{Name: "/"}},
		{Op: OpPutQueue, Queue: &Queue{Vhost: "/", Name: "q", Arguments: map[string]any{"x-max-length": 5}}},
		{Op: OpDeclareQueue, Queue: &Queue{Vhost: "/", Name: "q", Exclusive: true, Owner: &QueueOwner{Node: "n1", Conn: 1}}},
		{Op: OpDeleteVhost, Name: "/"},
		{Op: opSnapshot, Snapshot: NewState()},
	} {
		b, err := json.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{``, `{}`, `null`, `{"op":"put_queue"}`, `{"op":"snapshot","snapshot":{}}`, `{"op":"declare_queue","queue":{"name":"q"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newFSM()
		m.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: []byte(`{"op":"put_vhost","vhost":{"name":"/"}}`)}})
		before := dumpJSON(&Raft{fsm: m})
		res := m.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: data}).(applyResult)
		if res.err != nil && dumpJSON(&Raft{fsm: m}) != before {
			t.Fatalf("a refused entry (%v) changed the state", res.err)
		}
		if m.applied != 2 {
			t.Fatalf("applied index %d after entry 2", m.applied)
		}
	})
}

// FuzzRaftDecodeAnswer: a leader's answer is peer input.
func FuzzRaftDecodeAnswer(f *testing.F) {
	for _, s := range []string{`{"index":7,"changed":true}`, `{"leader":"n2"}`, `{}`, `[]`, `{"index":-1}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeAnswer(b)
	})
}

// FuzzRaftRestore: a snapshot comes from the leader (peer input): a bad one
// is refused with an error, never a panic, and a refused one leaves the
// state as it was.
func FuzzRaftRestore(f *testing.F) {
	m := newFSM()
	m.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: []byte(`{"op":"put_vhost","vhost":{"name":"/"},"req":{"s":"n1/x","n":1,"low":1}}`)}})
	snap, err := m.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(snap.(fsmSnapshot)))
	for _, s := range []string{`{}`, `{"state":null}`, `{"state":{},"sessions":[null]}`, `{"state":{},"sessions":[{"id":""}]}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := newFSM()
		m.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: []byte(`{"op":"put_vhost","vhost":{"name":"kept"}}`)}})
		before := dumpJSON(&Raft{fsm: m})
		if err := m.Restore(io.NopCloser(bytes.NewReader(b))); err != nil && dumpJSON(&Raft{fsm: m}) != before {
			t.Fatalf("a refused snapshot (%v) changed the state", err)
		}
	})
}
