package meta

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// migratedSuffix names meta.log once its state is in the Raft group.
const migratedSuffix = ".migrated"

// Migration steps a test can stop at (RaftConfig.crashAt).
const (
	crashBeforeApply = "before-apply" // the group is bootstrapped, nothing applied
	crashApplied     = "applied"      // the state is committed, meta.log still in place
	crashRenamed     = "renamed"      // meta.log renamed, the directory not yet synced
)

// migrate brings a single-node store's meta.log into the group once: its
// whole state as one snapshot command, applied only when the group has
// never applied a command, then meta.log is renamed aside. Every step can
// be cut by a crash: on the next open the command count (replicated, so it
// survives in snapshots too) says whether the state is in, and the rename
// is repeated; so the state is applied exactly once.
func (r *Raft) migrate(ctx context.Context, dir, crashAt string) error {
	path := filepath.Join(dir, logName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("meta: migrate: %w", err)
	}
	crash := func(step string) error {
		if crashAt == step {
			return fmt.Errorf("meta: migrate: test crash at %q", step)
		}
		return nil
	}
	leader, err := r.group.WaitLeader(ctx)
	if err != nil {
		return fmt.Errorf("meta: migrate %s: %w", path, err)
	}
	if leader != r.net.Node() {
		// A group with other members and another leader is not a new
		// cluster: its state is not ours to replace.
		r.log.Warn("meta.log left in place: the metadata group already has a leader elsewhere", "file", path, "leader", leader)
		return nil
	}
	// Everything committed is applied once the barrier returns, so the
	// command count is the group's.
	if err := r.group.Barrier(ctx); err != nil {
		return fmt.Errorf("meta: migrate %s: %w", path, err)
	}
	if err := crash(crashBeforeApply); err != nil {
		return err
	}
	if n := r.fsm.commandCount(); n == 0 {
		st, err := readLocalState(path)
		if err != nil {
			return err
		}
		if err := r.apply(ctx, Command{Op: opSnapshot, Snapshot: st}); err != nil {
			return fmt.Errorf("meta: migrate %s: %w", path, err)
		}
		r.log.Info("metadata migrated from the single-node log into the metadata group", "file", path,
			"vhosts", len(st.Vhosts), "users", len(st.Users), "queues", len(st.Queues), "exchanges", len(st.Exchanges))
	} else if _, err := os.Stat(path + migratedSuffix); err == nil {
		// Migrated before, and meta.log is back: not ours to apply nor
		// to rename over the migrated copy.
		r.log.Warn("meta.log left in place: the metadata group has its own state and meta.log.migrated exists", "file", path, "commands", n)
		return nil
	} else {
		r.log.Info("meta.log already applied (a crash cut the migration): renaming it aside", "file", path, "commands", n)
	}
	if err := crash(crashApplied); err != nil {
		return err
	}
	if err := os.Rename(path, path+migratedSuffix); err != nil {
		return fmt.Errorf("meta: migrate: rename %s: %w", path, err)
	}
	if err := crash(crashRenamed); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("meta: migrate: %w", err)
	}
	return nil
}

// readLocalState replays a single-node meta.log read-only (a torn tail
// ends it, as OpenLocal would cut it).
func readLocalState(path string) (*State, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("meta: migrate: %w", err)
	}
	defer f.Close()
	st := NewState()
	if _, _, err := replay(f, st); err != nil {
		return nil, fmt.Errorf("meta: migrate: read %s: %w", path, err)
	}
	return st, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
