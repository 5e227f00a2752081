package logstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

func TestLogsRoundTripAcrossGroupsAndReopen(t *testing.T) {
	dir := t.TempDir()
	type span struct{ first, last uint64 }
	groups := map[string]span{"meta": {1, 40}, "q/a": {1, 3}, "q/b": {7, 9}, "s/c": {1, 1}}
	s := open(t, dir, Options{SegmentBytes: 1 << 10}) // several segments
	for g, sp := range groups {
		for i := sp.first; i <= sp.last; i += 2 { // batches of two (one at the end)
			must(t, s.Group(g).StoreLogs(entries(g, i, min(i+1, sp.last), 3)))
		}
	}
	for g, sp := range groups {
		checkLog(t, s, g, sp.first, sp.last)
	}
	checkLog(t, s, "never-written", 0, 0)
	must(t, s.Close())
	if n := len(segments(t, dir)); n < 2 {
		t.Fatalf("%d segments, want several with SegmentBytes 1 KiB", n)
	}
	s = open(t, dir, Options{SegmentBytes: 1 << 10})
	for g, sp := range groups {
		checkLog(t, s, g, sp.first, sp.last)
	}
	var e raft.Log
	must(t, s.Group("meta").GetLog(5, &e))
	if e.Term != 3 || e.Type != raft.LogCommand {
		t.Fatalf("GetLog(5) after reopen: term %d type %v", e.Term, e.Type)
	}
}

func TestDeleteRange(t *testing.T) {
	tests := []struct {
		name        string
		min, max    uint64
		err         error
		first, last uint64
	}{
		{"prefix (compaction)", 1, 4, nil, 5, 10},
		{"prefix beyond first", 0, 2, nil, 3, 10},
		{"suffix (conflict)", 8, 10, nil, 1, 7},
		{"suffix past last", 6, 99, nil, 1, 5},
		{"everything", 1, 10, nil, 0, 0},
		{"nothing live", 11, 20, nil, 1, 10},
		{"hole", 3, 5, ErrHole, 1, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, Options{})
			g := s.Group("q")
			must(t, g.StoreLogs(entries("q", 1, 10, 1)))
			if err := g.DeleteRange(tt.min, tt.max); !errors.Is(err, tt.err) {
				t.Fatalf("DeleteRange(%d, %d) = %v, want %v", tt.min, tt.max, err, tt.err)
			}
			checkLog(t, s, "q", tt.first, tt.last)
			must(t, s.Close())
			s = open(t, dir, Options{})
			checkLog(t, s, "q", tt.first, tt.last)
			// The log goes on after its last entry (any index once empty).
			next := tt.last + 1
			if tt.first == 0 {
				next = 50
			}
			must(t, s.Group("q").StoreLog(entries("q", next, next, 2)[0]))
			first := tt.first
			if first == 0 {
				first = next
			}
			checkLog(t, s, "q", first, next)
		})
	}
}

func TestStoreLogsRefusesAGap(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	g := s.Group("q")
	must(t, g.StoreLogs(entries("q", 1, 3, 1)))
	for _, ls := range [][]*raft.Log{entries("q", 5, 5, 1), entries("q", 3, 4, 1), {entries("q", 4, 4, 1)[0], entries("q", 6, 6, 1)[0]}} {
		if err := g.StoreLogs(ls); !errors.Is(err, ErrNotMonotonic) {
			t.Fatalf("StoreLogs from %d: %v, want ErrNotMonotonic", ls[0].Index, err)
		}
	}
	checkLog(t, s, "q", 1, 3)
}

func TestStableStore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	a, b := s.Group("a"), s.Group("b")
	if _, err := a.Get([]byte("LastVoteCand")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a missing key: %v, want the error raft expects (\"not found\")", err)
	}
	if v, err := a.GetUint64([]byte("CurrentTerm")); err != nil || v != 0 {
		t.Fatalf("GetUint64 of a missing key = %d, %v; want 0, nil", v, err)
	}
	must(t, a.SetUint64([]byte("CurrentTerm"), 4))
	must(t, a.SetUint64([]byte("CurrentTerm"), 5))
	must(t, a.Set([]byte("LastVoteCand"), []byte("node-2")))
	must(t, b.SetUint64([]byte("CurrentTerm"), 9))
	check := func(s *Store) {
		t.Helper()
		for _, c := range []struct {
			g    string
			term uint64
			vote string
		}{{"a", 5, "node-2"}, {"b", 9, ""}} {
			g := s.Group(c.g)
			term, err := g.GetUint64([]byte("CurrentTerm"))
			must(t, err)
			vote, _ := g.Get([]byte("LastVoteCand"))
			if term != c.term || string(vote) != c.vote {
				t.Fatalf("group %s: term %d vote %q; want %d %q", c.g, term, vote, c.term, c.vote)
			}
		}
	}
	check(s)
	must(t, s.Close())
	check(open(t, dir, Options{}))
}

// An idle group's few live entries do not keep old segments: once the
// busy group compacts, they are copied forward and the old segments go,
// round after round; stable values too. A segment that is mostly live
// stays.
func TestIdleGroupDoesNotPinSegments(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 512}
	s := open(t, dir, opts)
	idle, busy := s.Group("idle"), s.Group("busy")
	must(t, idle.SetUint64([]byte("CurrentTerm"), 7))
	must(t, idle.StoreLogs(entries("idle", 1, 2, 1)))
	check := func(s *Store, first, last uint64) {
		t.Helper()
		checkLog(t, s, "busy", first, last)
		checkLog(t, s, "idle", 1, 2)
		if v, _ := s.Group("idle").GetUint64([]byte("CurrentTerm")); v != 7 {
			t.Fatalf("idle's CurrentTerm = %d, want 7", v)
		}
	}
	for round := uint64(0); round < 3; round++ {
		from := round*60 + 1
		for i := from; i < from+60; i++ {
			must(t, busy.StoreLog(entries("busy", i, i, 1)[0]))
		}
		live := len(segments(t, dir))
		if live < 4 {
			t.Fatalf("round %d: %d segments of live entries, want several", round, live)
		}
		must(t, busy.DeleteRange(1, from+54))
		must(t, busy.StoreLog(entries("busy", from+60, from+60, 1)[0]))
		if n := len(segments(t, dir)); n > 2 {
			t.Fatalf("round %d: %d segments after compaction, %d before: the idle group's entries pinned them", round, n, live)
		}
		check(s, from+55, from+60)
		must(t, s.Close())
		s = open(t, dir, opts)
		check(s, from+55, from+60)
		busy = s.Group("busy")
		must(t, busy.DeleteRange(from+60, from+60)) // the next round starts at from+60
	}
}

func TestManyGroupsAppendConcurrently(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{SegmentBytes: 64 << 10})
	const groups, per = 64, 50
	var wg sync.WaitGroup
	for gi := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("g%d", gi)
			g := s.Group(id)
			for i := uint64(1); i <= per; i++ {
				if err := g.StoreLog(entries(id, i, i, 1)[0]); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if err := g.SetUint64([]byte("CurrentTerm"), i); err != nil {
						t.Error(err)
						return
					}
				}
				var e raft.Log
				if err := g.GetLog(i, &e); err != nil || string(e.Data) != string(payload(id, i)) {
					t.Errorf("group %s GetLog(%d) = %q, %v", id, i, e.Data, err)
					return
				}
				if i == 30 {
					if err := g.DeleteRange(1, 20); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.Syncs >= st.Records {
		t.Errorf("%d fdatasyncs for %d records: appends of concurrent groups were not committed together", st.Syncs, st.Records)
	}
	must(t, s.Close())
	s = open(t, dir, Options{SegmentBytes: 64 << 10})
	for gi := range groups {
		id := fmt.Sprintf("g%d", gi)
		checkLog(t, s, id, 21, per)
		if v, _ := s.Group(id).GetUint64([]byte("CurrentTerm")); v != per {
			t.Fatalf("group %s CurrentTerm %d, want %d", id, v, per)
		}
	}
}

func TestClosedStoreRefuses(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	g := s.Group("q")
	must(t, g.StoreLog(entries("q", 1, 1, 1)[0]))
	must(t, s.Close())
	if err := g.StoreLog(entries("q", 2, 2, 1)[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("StoreLog after Close = %v, want ErrClosed", err)
	}
	var e raft.Log
	if err := g.GetLog(1, &e); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetLog after Close = %v, want ErrClosed", err)
	}
	if err := s.Group("").StoreLog(entries("x", 1, 1, 1)[0]); !errors.Is(err, ErrGroupID) && !errors.Is(err, ErrClosed) {
		t.Fatalf("empty group id: %v", err)
	}
}

// Drop removes a group's entries and stable values durably; other groups
// keep theirs. (One segment: the drop record itself must do it on reopen.)
func TestDropGroup(t *testing.T) {
	for _, name := range []string{"file", "inmem"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{}
			var stores GroupStores = NewInmem()
			if name == "file" {
				stores = open(t, dir, opts)
			}
			for _, id := range []string{"gone", "kept"} {
				must(t, stores.Group(id).SetUint64([]byte("CurrentTerm"), 3))
				must(t, stores.Group(id).StoreLogs(entries(id, 1, 20, 1)))
			}
			must(t, stores.Drop("gone"))
			check := func(stores GroupStores) {
				t.Helper()
				checkLog(t, stores, "gone", 0, 0)
				if _, err := stores.Group("gone").Get([]byte("CurrentTerm")); err == nil {
					t.Fatal("a dropped group's stable value is still there")
				}
				checkLog(t, stores, "kept", 1, 20)
				if v, _ := stores.Group("kept").GetUint64([]byte("CurrentTerm")); v != 3 {
					t.Fatalf("kept's CurrentTerm = %d, want 3", v)
				}
			}
			check(stores)
			if name == "inmem" {
				return
			}
			must(t, stores.(*Store).Close())
			stores = open(t, dir, opts)
			check(stores) // the drop record replayed
			must(t, stores.Group("kept").DeleteRange(1, 20))
			must(t, stores.Group("kept").StoreLog(entries("kept", 21, 21, 1)[0]))
			must(t, stores.(*Store).Close())
			s := open(t, dir, opts)
			checkLog(t, s, "gone", 0, 0)
			checkLog(t, s, "kept", 21, 21)
			must(t, s.Group("gone").StoreLog(entries("gone", 5, 5, 1)[0])) // the id starts again, empty
			checkLog(t, s, "gone", 5, 5)
		})
	}
}
