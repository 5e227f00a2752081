package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"
)

// fsmT feeds entries to a state machine as raft would, counting indexes.
type fsmT struct {
	t     *testing.T
	f     *fsm
	index uint64
	ev    *events
}

func newFSMT(t *testing.T) *fsmT {
	m := &fsmT{t: t, f: newFSM(), ev: &events{}}
	m.f.subscribe(m.ev.add)
	return m
}

func entryBytes(t *testing.T, c Command, req *reqID) []byte {
	t.Helper()
	b, err := json.Marshal(entry{Command: c, Req: req})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (m *fsmT) apply(data []byte) applyResult {
	m.index++
	return m.f.Apply(&raft.Log{Index: m.index, Type: raft.LogCommand, Data: data}).(applyResult)
}

func TestRaftWriteCopiesApplyOnce(t *testing.T) {
	m := newFSMT(t)
	vhost := entryBytes(t, Command{Op: OpPutVhost, Vhost: &Vhost{Name: "/"}}, &reqID{Session: "n1/a", Seq: 1, Low: 1})
	declare := entryBytes(t, Command{Op: OpDeclareQueue, Queue: &Queue{Vhost: "/", Name: "q", Durable: true}}, &reqID{Session: "n1/a", Seq: 2, Low: 1})
	refused := entryBytes(t, Command{Op: OpPutQueue, Queue: &Queue{Vhost: "nope", Name: "q"}}, &reqID{Session: "n1/a", Seq: 3, Low: 1})

	for _, data := range [][]byte{vhost, declare, refused} {
		first, again := m.apply(data), m.apply(data)
		if first.changed != again.changed || (first.err == nil) != (again.err == nil) {
			t.Fatalf("first copy %+v, second %+v", first, again)
		}
		if first.err != nil && (first.err.Error() != again.err.Error() || !errors.Is(again.err, ErrNotFound)) {
			t.Fatalf("first copy refused with %v, second with %v", first.err, again.err)
		}
	}
	if got := m.ev.get(); len(got) != 2 {
		t.Fatalf("events %v, want one per write applied (vhost, queue)", got)
	}

	// Write 4 says writes below 4 were answered: a late copy of write 2
	// is dropped even after the queue is gone.
	m.apply(entryBytes(t, Command{Op: OpDeleteQueue, VhostName: "/", Name: "q"}, &reqID{Session: "n1/a", Seq: 4, Low: 4}))
	if res := m.apply(declare); res.changed || res.err != nil {
		t.Fatalf("late copy answered %+v", res)
	}
	if qs := (&Raft{fsm: m.f}).Queues("/"); len(qs) != 0 {
		t.Fatalf("a late copy re-created %v", qs)
	}
	if n := len(m.f.sessions["n1/a"].Outcomes); n != 1 {
		t.Fatalf("the session keeps %d outcomes after its writes below 4 were answered, want 1", n)
	}
}

func TestRaftSnapshotKeepsSessions(t *testing.T) {
	m := newFSMT(t)
	put := entryBytes(t, Command{Op: OpPutVhost, Vhost: &Vhost{Name: "/"}}, &reqID{Session: "n2/b", Seq: 7, Low: 7})
	m.apply(put)
	snap, err := m.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.Write(snap.(fsmSnapshot)); err != nil {
		t.Fatal(err)
	}
	r := newFSMT(t)
	if err := r.f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if got := r.ev.count(Reset); got != 1 {
		t.Fatalf("%d Reset events after Restore, want 1", got)
	}
	r.index = m.index
	if res := r.apply(put); !res.changed {
		t.Fatalf("copy after restore answered %+v, want the first copy's changed", res)
	}
	if got := r.ev.count(VhostPut); got != 0 {
		t.Fatalf("a copy applied after a restore published %d events", got)
	}
}

func TestRaftSessionTableIsBounded(t *testing.T) {
	m := newFSMT(t)
	for i := range maxSessions + 50 {
		m.apply(entryBytes(t, Command{Op: OpPutUser, User: &User{Name: "u"}}, &reqID{Session: "s" + strconv.Itoa(i), Seq: 1, Low: 1}))
	}
	if n := len(m.f.sessions); n != maxSessions {
		t.Fatalf("%d sessions kept, want %d", n, maxSessions)
	}
	if _, ok := m.f.sessions["s0"]; ok {
		t.Fatal("the least recently used session was kept")
	}
}
