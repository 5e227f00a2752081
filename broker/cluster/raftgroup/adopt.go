package raftgroup

import (
	"fmt"
	"log/slog"

	"github.com/hashicorp/raft"
)

// checkMember reads the group's latest configuration from its state and
// makes sure this node is in it: a one-voter group of another name is
// adopted when cfg.AdoptAlone (a renamed single node), anything else
// without this node is ErrNotMember.
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
	if len(voters) != 1 || !cfg.AdoptAlone {
		return fmt.Errorf("raftgroup %s: %w: its members are %v, this node is %s", cfg.ID, ErrNotMember, voters, cfg.Node)
	}
	self := raft.Server{ID: raft.ServerID(cfg.Node), Address: raft.ServerAddress(cfg.Node), Suffrage: raft.Voter}
	recover := *rc
	if err := raft.RecoverCluster(&recover, cfg.FSM, logs, stable, snaps, trans, raft.Configuration{Servers: []raft.Server{self}}); err != nil {
		return fmt.Errorf("raftgroup %s: adopt the group of %s: %w", cfg.ID, voters[0], err)
	}
	log.Warn("raftgroup: this node's name changed: it took over the one-member group of its old name", "old", voters[0], "new", cfg.Node)
	return nil
}
