package store

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// v1Fixture is a version-1 data directory: vhosts with names whose
// directory names change, classic queues, streams, a message store each.
var v1Fixture = []VhostQueues{
	{Vhost: "/", Queues: []string{"plain", "Orders.v1", "é.q", "Events.s", "..", "conv"}},
	{Vhost: "a b", Queues: []string{"plain", "x.y"}},
	{Vhost: "Dev.Team é", Queues: []string{"Events.s"}},
}

// writeV1 builds the fixture in the version-1 layout under dir and returns
// the files the migrated directory must hold (path relative to dir ->
// content).
func writeV1(t *testing.T, dir string) map[string]string {
	t.Helper()
	want := map[string]string{}
	put := func(oldRel, newRel, content string) {
		p := filepath.Join(dir, oldRel)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		if newRel != "" {
			want[newRel] = content
		}
	}
	for _, vq := range v1Fixture {
		oldV := filepath.Join(vhostsDir, legacyVhostDirName(vq.Vhost))
		newV, _ := filepath.Rel(dir, VhostDir(dir, vq.Vhost))
		put(filepath.Join(oldV, msgStore, "1.rdq"), filepath.Join(newV, msgStore, "1.rdq"), "store of "+vq.Vhost)
		for _, q := range vq.Queues {
			switch {
			case q == "..":
				// Version 1 put this queue's files in the vhost's
				// directory itself: nothing to move.
			case strings.HasSuffix(q, ".s"):
				put(filepath.Join(oldV, streamsDir, legacyStreamDirName(q), "0.segment"),
					filepath.Join(newV, streamsDir, filepath.Base(StreamDir("", q)), "0.segment"), "stream "+q)
			case q == "conv":
				// A conversion finished but not swapped in: migration
				// completes it, as opening the queue would.
				oldQ := filepath.Join(oldV, queuesDir, legacyQueueDirName(q))
				put(filepath.Join(oldQ, "0.qi"), "", "before conversion")
				put(filepath.Join(oldQ+convertingSuffix, "0.qi"), filepath.Join(newV, queuesDir, filepath.Base(queueDir("", q)), "0.qi"), "converted")
				put(filepath.Join(oldQ+convertingSuffix, "complete"), "", "")
			default:
				put(filepath.Join(oldV, queuesDir, legacyQueueDirName(q), "0.qi"),
					filepath.Join(newV, queuesDir, filepath.Base(queueDir("", q)), "0.qi"), "queue "+q)
			}
		}
	}
	// A directory no durable queue owns stays, in the old tree.
	put(filepath.Join(vhostsDir, "%2F", queuesDir, "orphan", "0.qi"), filepath.Join(prevVhostsDir, "%2F", queuesDir, "orphan", "0.qi"), "orphan")
	want[formatFile] = "2\n"
	return want
}

// files returns the regular files under dir (relative path -> content).
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		got[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameFiles(t *testing.T, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok || g != w {
			t.Errorf("%s: %q (present %v), want %q", p, g, ok, w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected file %s", p)
		}
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var errCrash = errors.New("crash")

// TestMigrateLayoutSurvivesACrashAtEveryStep interrupts the migration of a
// version-1 data directory before each of its renames in turn, then runs
// it again: every file ends up at its new name with its content, whatever
// step the first run stopped at.
func TestMigrateLayoutSurvivesACrashAtEveryStep(t *testing.T) {
	ctx := context.Background()
	// A full run, counting its renames.
	dir := t.TempDir()
	want := writeV1(t, dir)
	renames := 0
	m := &migration{dataDir: dir, log: quiet, beforeRename: func() error { renames++; return nil }}
	if err := m.run(ctx, v1Fixture); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, files(t, dir), want)
	if renames < 10 {
		t.Fatalf("%d renames: the fixture is not what the test thinks", renames)
	}
	for crashAt := 0; crashAt < renames; crashAt++ {
		dir := t.TempDir()
		writeV1(t, dir)
		n := 0
		m := &migration{dataDir: dir, log: quiet, beforeRename: func() error {
			if n == crashAt {
				return errCrash
			}
			n++
			return nil
		}}
		if err := m.run(ctx, v1Fixture); !errors.Is(err, errCrash) {
			t.Fatalf("crash at rename %d: run returned %v", crashAt, err)
		}
		if err := MigrateLayout(ctx, dir, v1Fixture, quiet); err != nil {
			t.Fatalf("after a crash at rename %d: %v", crashAt, err)
		}
		sameFiles(t, files(t, dir), want)
	}
}

// TestMigrateLayoutOnce checks a migrated or fresh directory is left alone
// and a newer layout is refused.
func TestMigrateLayoutOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	want := writeV1(t, dir)
	for range 2 {
		if err := MigrateLayout(ctx, dir, v1Fixture, quiet); err != nil {
			t.Fatal(err)
		}
		sameFiles(t, files(t, dir), want)
	}
	fresh := t.TempDir()
	if err := MigrateLayout(ctx, fresh, nil, quiet); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, files(t, fresh), map[string]string{formatFile: "2\n"})
	if err := os.WriteFile(filepath.Join(fresh, formatFile), []byte("3\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := MigrateLayout(ctx, fresh, nil, quiet); !errors.Is(err, ErrNewerLayout) {
		t.Fatalf("layout 3: %v, want ErrNewerLayout", err)
	}
}
