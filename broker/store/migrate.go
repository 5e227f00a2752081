package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/warrenmq/warren/broker/store/pathname"
)

// LayoutVersion is the data directory layout this broker writes (see
// layout.go). Version 1 had no format file.
const LayoutVersion = 2

const (
	formatFile = "format"
	// nextVhostsDir is where MigrateLayout builds the new tree; prevVhostsDir
	// is where the old tree goes once everything was moved out of it.
	nextVhostsDir = vhostsDir + ".migrating"
	prevVhostsDir = vhostsDir + ".v1"
)

// ErrNewerLayout is returned by MigrateLayout for a data directory written
// by a newer broker.
var ErrNewerLayout = errors.New("store: data directory written by a newer broker")

// VhostQueues names a vhost and its durable queues (classic and streams),
// as the metadata records them.
type VhostQueues struct {
	Vhost  string
	Queues []string
}

// MigrateLayout brings a data directory to LayoutVersion before any vhost
// opens. A version-1 directory (no format file) is moved, directory by
// directory, into a new tree at vhosts.migrating: each vhost's message store,
// each queue's and stream's directory, renamed atomically to its new name
// and both parents fsynced. Then the old tree becomes vhosts.v1, the new one
// vhosts, and the format file is written (fsynced) last. Every step can be
// redone: a crash at any point leaves each directory either in the old tree
// or in the new one, and the next start carries on from the state it finds.
// Nothing is deleted: what no queue owned stays in vhosts.v1 (logged), and
// vhosts.v1 is removed only when nothing but empty directories is left.
func MigrateLayout(ctx context.Context, dataDir string, vhosts []VhostQueues, log *slog.Logger) error {
	m := &migration{dataDir: dataDir, log: log}
	return m.run(ctx, vhosts)
}

type migration struct {
	dataDir string
	log     *slog.Logger
	// beforeRename, when set, runs before every rename (tests: a crash).
	beforeRename func() error
	moved        int // directories moved by this run
}

func (m *migration) path(elem ...string) string {
	return filepath.Join(append([]string{m.dataDir}, elem...)...)
}

func (m *migration) run(ctx context.Context, vhosts []VhostQueues) error {
	ver, err := readLayoutVersion(m.path(formatFile))
	if err != nil {
		return err
	}
	if ver == LayoutVersion {
		return nil
	}
	if ver > LayoutVersion {
		return fmt.Errorf("%w: layout %d, this broker knows up to %d (%s)", ErrNewerLayout, ver, LayoutVersion, m.path(formatFile))
	}
	cur, next, prev := m.path(vhostsDir), m.path(nextVhostsDir), m.path(prevVhostsDir)
	legacy := exists(cur) || exists(next)
	if exists(cur) && !exists(next) && !exists(prev) {
		m.log.Info("migrating the data directory to layout 2 (escaped names)", "dir", m.dataDir)
		if err := mkdirSynced(next); err != nil {
			return err
		}
	}
	if exists(cur) && exists(next) {
		for _, vq := range vhosts {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := m.moveVhost(vq); err != nil {
				return err
			}
		}
		if err := m.rename(cur, prev); err != nil {
			return err
		}
	}
	if exists(next) && !exists(cur) {
		if err := m.rename(next, cur); err != nil {
			return err
		}
	}
	if err := writeFileSync(m.path(formatFile), []byte(strconv.Itoa(LayoutVersion)+"\n")); err != nil {
		return err
	}
	syncDir(m.dataDir)
	if legacy {
		m.log.Info("data directory migrated to layout 2", "dir", m.dataDir, "moved_dirs", m.moved)
	}
	if exists(prev) {
		removeEmptyDirs(prev)
		if exists(prev) {
			m.log.Warn("files of the previous layout that belong to no vhost or durable queue were kept; remove them once checked", "dir", prev)
		}
	}
	return nil
}

// moveVhost moves a vhost's message store, queues and streams from the old
// tree into the new one.
func (m *migration) moveVhost(vq VhostQueues) error {
	src := filepath.Join(m.path(vhostsDir), legacyVhostDirName(vq.Vhost))
	if isDotName(legacyVhostDirName(vq.Vhost)) || !exists(src) {
		return nil
	}
	dst := filepath.Join(m.path(nextVhostsDir), pathname.Escape(vq.Vhost))
	for _, d := range []string{dst, filepath.Join(dst, queuesDir), filepath.Join(dst, streamsDir)} {
		if err := mkdirSynced(d); err != nil {
			return err
		}
	}
	if err := m.move(filepath.Join(src, msgStore), filepath.Join(dst, msgStore)); err != nil {
		return err
	}
	for _, q := range vq.Queues {
		oldq := filepath.Join(src, queuesDir, legacyQueueDirName(q))
		if isDotName(legacyQueueDirName(q)) {
			m.log.Warn("queue's files were its vhost's own directory in the previous layout; it starts empty", "vhost", vq.Vhost, "queue", q)
		} else {
			// What opening the queue would have done: finish or
			// discard a conversion a crash interrupted.
			if err := finishConversion(oldq); err != nil {
				return err
			}
			if err := m.move(oldq, queueDir(dst, q)); err != nil {
				return err
			}
		}
		if err := m.move(filepath.Join(src, streamsDir, legacyStreamDirName(q)), StreamDir(dst, q)); err != nil {
			return err
		}
	}
	return nil
}

// move renames src to dst when src exists (a crash may have moved it
// already) and dst does not (two names that shared one old directory: the
// first one takes it).
func (m *migration) move(src, dst string) error {
	if !exists(src) {
		return nil
	}
	if exists(dst) {
		m.log.Warn("two names shared a directory in the previous layout; the first one keeps it", "dir", src, "kept", dst)
		return nil
	}
	return m.rename(src, dst)
}

// rename renames atomically and fsyncs both parent directories.
func (m *migration) rename(src, dst string) error {
	if m.beforeRename != nil {
		if err := m.beforeRename(); err != nil {
			return err
		}
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("store: migrate layout: %w", err)
	}
	m.moved++
	syncDir(filepath.Dir(dst))
	syncDir(filepath.Dir(src))
	return nil
}

// readLayoutVersion reads the format file: 1 when there is none.
func readLayoutVersion(path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read %s: %w", path, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("store: %s holds %q, not a layout version", path, data)
	}
	return v, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func isDotName(name string) bool { return name == "" || name == "." || name == ".." }

// mkdirSynced creates dir (and its parents) and fsyncs its parent.
func mkdirSynced(dir string) error {
	if exists(dir) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("store: migrate layout: %w", err)
	}
	syncDir(filepath.Dir(dir))
	return nil
}

// removeEmptyDirs removes the directories under (and including) root that
// hold nothing but empty directories; files stay.
func removeEmptyDirs(root string) {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.Reverse(dirs)
	for _, d := range dirs {
		_ = os.Remove(d) // fails, as wanted, when not empty
	}
	syncDir(filepath.Dir(root))
}
