package raftgroup

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"
)

// Server is one member of a group's configuration.
type Server struct {
	Node  string // node name: raft ServerID and ServerAddress
	Voter bool   // false: a non-voter (staging or learner)
}

// AddVoter adds node as a voter (or makes a non-voter one); on the leader
// only (ErrNotLeader elsewhere). It returns once the new configuration is
// committed; node then catches up from the log or a snapshot.
func (g *Group) AddVoter(ctx context.Context, node string) error {
	return g.wait(ctx, func() raft.Future {
		return g.r().AddVoter(raft.ServerID(node), raft.ServerAddress(node), 0, timeoutOf(ctx))
	})
}

// RemoveServer removes node from the group; on the leader only. A leader
// removing itself steps down once the configuration is committed, and its
// group shuts down (later calls give ErrClosed); a removed follower just
// stops hearing from the group: its node closes it.
func (g *Group) RemoveServer(ctx context.Context, node string) error {
	return g.wait(ctx, func() raft.Future {
		return g.r().RemoveServer(raft.ServerID(node), 0, timeoutOf(ctx))
	})
}

// TransferLeadership hands leadership to node ("" lets raft pick the most
// up-to-date voter) and returns once the transfer finished; on the leader
// only.
func (g *Group) TransferLeadership(ctx context.Context, node string) error {
	return g.wait(ctx, func() raft.Future {
		if node == "" {
			return g.r().LeadershipTransfer()
		}
		return g.r().LeadershipTransferToServer(raft.ServerID(node), raft.ServerAddress(node))
	})
}

// Configuration is the group's latest configuration as this node knows it
// (possibly not yet committed).
func (g *Group) Configuration(ctx context.Context) ([]Server, error) {
	var f raft.ConfigurationFuture
	if err := g.wait(ctx, func() raft.Future {
		f = g.r().GetConfiguration()
		return f
	}); err != nil {
		return nil, err
	}
	servers := f.Configuration().Servers
	out := make([]Server, 0, len(servers))
	for _, s := range servers {
		if string(s.ID) != string(s.Address) {
			return nil, fmt.Errorf("raftgroup %s: member %q has address %q: ids and addresses are node names", g.id, s.ID, s.Address)
		}
		out = append(out, Server{Node: string(s.ID), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}
