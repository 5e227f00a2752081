package meta

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/broker/cluster/raftgroup"
)

// adoptAlone is the check a renamed lone node passes before it takes over
// its old name's group: the metadata's node table, as of the group's last
// entry, holds that one name and it carries this node's incarnation id. A
// node that left a cluster, or joined one and kept only its first
// entries, also sees a configuration of one other voter, but that voter's
// entry is another node's: adopting would fork that cluster.
func adoptAlone(cfg RaftConfig) *raftgroup.Adopt {
	if !cfg.AdoptAlone {
		return nil
	}
	return &raftgroup.Adopt{
		NewFSM: func() raft.FSM { return newFSM() },
		Alone: func(state raft.FSM, old string) error {
			f, ok := state.(*fsm)
			if !ok {
				return fmt.Errorf("meta: unexpected state machine %T", state)
			}
			f.mu.RLock()
			defer f.mu.RUnlock()
			nodes := f.state.Nodes
			n, ok := nodes[old]
			switch {
			case cfg.Incarnation == "":
				return fmt.Errorf("this node's incarnation id is unknown")
			case len(nodes) != 1 || !ok:
				return fmt.Errorf("the metadata lists %d members (%s's entry: %v); it was not this node alone", len(nodes), old, ok)
			case n.ID != cfg.Incarnation:
				return fmt.Errorf("%s has incarnation %q in the metadata, this node is %q: it is another node's state", old, n.ID, cfg.Incarnation)
			}
			return nil
		},
	}
}

// Reset wipes this node's metadata and its copy of the group, and starts
// the group again empty (Fresh), so that a node alone joins another
// cluster without a restart (warren ctl join): subscribers get a Reset
// event with an empty state, then the state of the cluster the node joins
// as its leader sends it. Only a node alone in its group may reset
// (raftgroup.ErrNotAlone otherwise). Writes in flight fail.
func (r *Raft) Reset(ctx context.Context) error {
	if err := r.group.Reset(ctx, r.fsm.wipe); err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	return nil
}

// wipe empties the state machine (raft is stopped: nothing applies
// meanwhile) and tells the subscribers.
func (f *fsm) wipe() {
	f.sessions = sessions{}
	f.mu.Lock()
	*f.state = *NewState()
	f.mu.Unlock()
	f.idxMu.Lock()
	f.commands = 0
	f.applied = 0
	close(f.advanced)
	f.advanced = make(chan struct{})
	f.idxMu.Unlock()
	f.publish(Event{Kind: Reset})
}
