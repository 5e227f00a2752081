package logstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func open(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, opts)
	must(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// entries returns logs from..to of term, each with data naming group and index.
func entries(group string, from, to, term uint64) []*raft.Log {
	var ls []*raft.Log
	for i := from; i <= to; i++ {
		ls = append(ls, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: payload(group, i)})
	}
	return ls
}

func payload(group string, i uint64) []byte {
	return []byte(fmt.Sprintf("%s/%d", group, i))
}

// checkLog asserts group holds exactly first..last, each with its payload.
func checkLog(t testing.TB, s GroupStores, group string, first, last uint64) {
	t.Helper()
	g := s.Group(group)
	f, err := g.FirstIndex()
	must(t, err)
	l, err := g.LastIndex()
	must(t, err)
	if f != first || l != last {
		t.Fatalf("group %s: FirstIndex, LastIndex = %d, %d; want %d, %d", group, f, l, first, last)
	}
	if first == 0 {
		return
	}
	for i := first; i <= last; i++ {
		var e raft.Log
		must(t, g.GetLog(i, &e))
		if e.Index != i || string(e.Data) != string(payload(group, i)) {
			t.Fatalf("group %s: GetLog(%d) = index %d data %q", group, i, e.Index, e.Data)
		}
	}
	for _, i := range []uint64{first - 1, last + 1} {
		var e raft.Log
		if err := g.GetLog(i, &e); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("group %s: GetLog(%d) = %v, want ErrLogNotFound", group, i, err)
		}
	}
}

// segments returns the paths of dir's segment files, oldest first.
func segments(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	must(t, err)
	return m
}

func copyDir(t testing.TB, from string) string {
	t.Helper()
	to := t.TempDir()
	ents, err := os.ReadDir(from)
	must(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o644))
	}
	return to
}
