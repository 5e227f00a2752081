package raftgroup

import (
	"fmt"
	"log/slog"

	"github.com/hashicorp/raft"
)

// Adopt lets a node whose name changed take over the one-member group of
// its old name (Config.AdoptAlone). A configuration of one other voter is
// not proof enough: a node that left a cluster of two, or one that joined
// a cluster and kept only its first entries, also holds a configuration
// of one other voter, and adopting that group would fork a second cluster
// from the first's history. So the group's own state decides: Alone gets
// a state machine made by NewFSM, holding the group's state as of its last
// entry (snapshot and log replayed), and the old voter's name, and returns
// nil only when that state shows this very node (its incarnation) was the
// group's only member.
type Adopt struct {
	NewFSM func() raft.FSM
	Alone  func(state raft.FSM, old string) error
}

// checkMember reads the group's latest configuration from its state and
// makes sure this node is in it: a one-voter group of another name is
// adopted when cfg.AdoptAlone says this node was that voter (a renamed
// single node), anything else without this node is ErrNotMember.
func checkMember(cfg Config, rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, trans raft.Transport, log *slog.Logger) error {
	probe := *rc
	conf, err := raft.GetConfiguration(&probe, cfg.FSM, logs, stable, snaps, trans)
	if err != nil {
		return fmt.Errorf("raftgroup %s: read the configuration: %w", cfg.ID, err)
	}
	var voters []raft.ServerID
	for _, s := range conf.Servers {
		if s.ID == raft.ServerID(cfg.Node) {
			return nil
		}
		if s.Suffrage == raft.Voter {
			voters = append(voters, s.ID)
		}
	}
	if len(conf.Servers) == 0 { // no configuration entry yet: nothing to check
		return nil
	}
	if len(voters) != 1 || cfg.AdoptAlone == nil {
		return fmt.Errorf("raftgroup %s: %w: its members are %v, this node is %s", cfg.ID, ErrNotMember, voters, cfg.Node)
	}
	old := string(voters[0])
	state := cfg.AdoptAlone.NewFSM()
	if err := replay(state, logs, snaps); err != nil {
		return fmt.Errorf("raftgroup %s: read the state of %s's group: %w", cfg.ID, old, err)
	}
	if err := cfg.AdoptAlone.Alone(state, old); err != nil {
		return fmt.Errorf("raftgroup %s: %w: its only member is %s, this node is %s, and it cannot take that member's place: %v", cfg.ID, ErrNotMember, old, cfg.Node, err)
	}
	self := raft.Server{ID: raft.ServerID(cfg.Node), Address: raft.ServerAddress(cfg.Node), Suffrage: raft.Voter}
	recover := *rc
	if err := raft.RecoverCluster(&recover, cfg.FSM, logs, stable, snaps, trans, raft.Configuration{Servers: []raft.Server{self}}); err != nil {
		return fmt.Errorf("raftgroup %s: adopt the group of %s: %w", cfg.ID, old, err)
	}
	log.Warn("raftgroup: this node's name changed: it took over the one-member group of its old name", "old", old, "new", cfg.Node)
	return nil
}

// replay restores the latest snapshot into fsm and applies every log
// entry after it, as RecoverCluster does.
func replay(fsm raft.FSM, logs raft.LogStore, snaps raft.SnapshotStore) error {
	var after uint64
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	if len(list) > 0 {
		meta, rc, err := snaps.Open(list[0].ID)
		if err != nil {
			return fmt.Errorf("open snapshot %s: %w", list[0].ID, err)
		}
		err = fsm.Restore(rc)
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("restore snapshot %s: %w", list[0].ID, err)
		}
		after = meta.Index
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return err
	}
	for i := max(first, after+1); i <= last && i > 0; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return fmt.Errorf("read entry %d: %w", i, err)
		}
		if l.Type == raft.LogCommand {
			fsm.Apply(&l)
		}
	}
	return nil
}
