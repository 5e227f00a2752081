package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// ErrNotAlone: Reset of a group whose configuration has other members
// than this node (their state would be forked or lost).
var ErrNotAlone = errors.New("raftgroup: the group has other members")

// Reset wipes the group's state on this node and starts it again empty
// (Fresh: it waits to be bootstrapped or added by another cluster's
// leader), so a node alone can join another cluster without a restart.
// Only a group whose configuration is this node alone may be reset
// (ErrNotAlone otherwise): nobody else holds its state. wipe runs after
// raft stopped and before the new one starts: the caller empties its FSM
// there (raft applies nothing meanwhile). Calls in flight on the old raft
// fail with ErrClosed.
func (g *Group) Reset(ctx context.Context, wipe func()) error {
	servers, err := g.Configuration(ctx)
	if err != nil {
		return err
	}
	if len(servers) != 1 || servers[0].Node != g.node {
		return fmt.Errorf("raftgroup %s: reset: %w (%v)", g.id, ErrNotAlone, servers)
	}
	g.resetMu.Lock()
	defer g.resetMu.Unlock()
	select {
	case <-g.done:
		return fmt.Errorf("raftgroup %s: reset: %w", g.id, ErrClosed)
	default:
	}
	old := g.r()
	old.DeregisterObserver(g.obs)
	if err := old.Shutdown().Error(); err != nil {
		return fmt.Errorf("raftgroup %s: reset: shut raft down: %w", g.id, err)
	}
	if err := g.cfg.Stores.Drop(g.id); err != nil {
		return fmt.Errorf("raftgroup %s: reset: drop the log: %w", g.id, err)
	}
	if err := os.RemoveAll(g.cfg.SnapshotDir); err != nil {
		return fmt.Errorf("raftgroup %s: reset: remove the snapshots: %w", g.id, err)
	}
	if wipe != nil {
		wipe()
	}
	r, had, err := startRaft(g.cfg, g.timing, g.log)
	if err != nil {
		return fmt.Errorf("raftgroup %s: reset: %w", g.id, err)
	}
	if had {
		_ = r.Shutdown().Error()
		return fmt.Errorf("raftgroup %s: reset: state left after the wipe", g.id)
	}
	g.hurryMu.Lock()
	g.hurried, g.hurriedFrom = false, ""
	g.hurryMu.Unlock()
	g.raft.Store(r)
	g.fresh.Store(true)
	r.RegisterObserver(g.obs)
	g.log.Warn("raftgroup: reset: this node's state of the group was wiped; it waits to join a cluster")
	return nil
}
