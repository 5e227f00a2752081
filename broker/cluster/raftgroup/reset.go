package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/raft"
)

// ErrNotAlone: Reset of a group whose configuration has other members
// than this node (their state would be forked or lost).
var ErrNotAlone = errors.New("raftgroup: the group has other members")

// Reset wipes the group's state on this node and starts it again empty
// (Fresh: it waits to be bootstrapped or added by another cluster's
// leader), so a node alone can join another cluster without a restart.
// Only a group whose configuration is this node alone may be reset
// (ErrNotAlone otherwise): nobody else holds its state; the check runs
// under the reset lock, right before raft stops. wipe runs after raft
// stopped and before the new one starts: the caller empties its FSM there
// (raft applies nothing meanwhile). Calls in flight on the old raft fail
// with ErrClosed.
//
// A failure after raft stopped (the log or the snapshots cannot be
// removed) never leaves the group without a raft: the FSM is wiped and
// raft starts again on whatever state is left (it replays it into the
// FSM; Fresh reports whether nothing was left), and the error says so.
// Only when raft cannot start again is the group down on this node (every
// call fails with ErrClosed, Down reports it: a health check's answer) and
// the error says the node must restart.
func (g *Group) Reset(ctx context.Context, wipe func()) error {
	g.resetMu.Lock()
	defer g.resetMu.Unlock()
	select {
	case <-g.done:
		return fmt.Errorf("raftgroup %s: reset: %w", g.id, ErrClosed)
	default:
	}
	servers, err := g.Configuration(ctx)
	if err != nil {
		return err
	}
	if len(servers) != 1 || servers[0].Node != g.node {
		return fmt.Errorf("raftgroup %s: reset: %w (%v)", g.id, ErrNotAlone, servers)
	}
	old := g.r()
	old.DeregisterObserver(g.obs)
	if err := old.Shutdown().Error(); err != nil {
		return g.restartAfterReset(fmt.Errorf("shut raft down: %w", err), wipe)
	}
	if err := g.cfg.Stores.Drop(g.id); err != nil {
		return g.restartAfterReset(fmt.Errorf("drop the log: %w", err), wipe)
	}
	if err := os.RemoveAll(g.cfg.SnapshotDir); err != nil {
		return g.restartAfterReset(fmt.Errorf("remove the snapshots: %w", err), wipe)
	}
	if wipe != nil {
		wipe()
	}
	r, had, err := startRaft(g.cfg, g.timing, g.log)
	if err != nil {
		return g.restartAfterReset(err, nil)
	}
	g.swapRaft(r, had)
	if had {
		return fmt.Errorf("raftgroup %s: reset: state left after the wipe (raft runs on it)", g.id)
	}
	g.log.Warn("raftgroup: reset: this node's state of the group was wiped; it waits to join a cluster")
	return nil
}

// restartAfterReset starts raft again after Reset failed once the old raft
// stopped, on what is left of the group's state (the FSM wiped first, as
// raft replays that state into it). Under resetMu.
func (g *Group) restartAfterReset(cause error, wipe func()) error {
	if wipe != nil {
		wipe()
	}
	r, had, err := startRaft(g.cfg, g.timing, g.log)
	if err != nil {
		g.log.Error("raftgroup: reset failed and raft does not start again: the group is down on this node until it restarts", "reset_error", cause, "error", err)
		down := fmt.Errorf("raftgroup %s: reset: %v; raft does not start again (%v): %w (restart the node)", g.id, cause, err, ErrClosed)
		g.down.Store(&down)
		return down
	}
	g.swapRaft(r, had)
	g.log.Error("raftgroup: reset failed; raft started again on the state left", "error", cause, "fresh", !had)
	return fmt.Errorf("raftgroup %s: reset: %v (raft started again on the state left; fresh: %v)", g.id, cause, !had)
}

// swapRaft makes r the group's raft after a reset: what belonged to the
// old one (a hurried timeout, the nudge mark of its log) goes with it.
func (g *Group) swapRaft(r *raft.Raft, had bool) {
	g.hurryMu.Lock()
	g.hurried, g.hurriedFrom = false, ""
	g.hurryMu.Unlock()
	g.nudged.Store(0)
	g.raft.Store(r)
	g.fresh.Store(!had)
	r.RegisterObserver(g.obs)
}
