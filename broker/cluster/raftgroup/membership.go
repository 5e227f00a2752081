package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
// only. raft gives a transfer one election timeout: a target slower than
// that (a loaded machine, a candidate that lost its first election) makes
// raft give up while this node still leads. Then the transfer goes again,
// until ctx ends: ctx, not raft's timer, bounds how long the caller waits.
// A transfer that raft gave up on but that moved the leadership after all
// succeeded.
func (g *Group) TransferLeadership(ctx context.Context, node string) error {
	start := func() raft.Future {
		if node == "" {
			return g.r().LeadershipTransfer()
		}
		return g.r().LeadershipTransferToServer(raft.ServerID(node), raft.ServerAddress(node))
	}
	for attempt := 0; ; attempt++ {
		err := g.waitRaw(ctx, start)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("raftgroup %s: transfer leadership (last try: %v): %w", g.id, err, ctx.Err())
		case !transferUnfinished(err):
			return g.mapErr(err)
		}
		// Let the target's election (if any) finish, then look again.
		if werr := g.settle(ctx, attempt); werr != nil {
			return fmt.Errorf("raftgroup %s: transfer leadership (last try: %v): %w", g.id, err, werr)
		}
		if g.IsLeader() {
			continue
		}
		leader, werr := g.WaitLeader(ctx)
		switch {
		case werr != nil:
			return fmt.Errorf("raftgroup %s: transfer leadership (last try: %v): %w", g.id, err, werr)
		case leader == g.node:
			continue // this node won the election again: go again
		case node == "" || leader == node:
			return nil
		}
		return g.mapErr(raft.ErrNotLeader)
	}
}

// transferUnfinished reports whether a transfer failed in a way a retry
// may fix: raft timed it out (it has no sentinel for that), or the previous
// transfer still holds raft's in-progress flag (raft clears it just after
// answering).
func transferUnfinished(err error) bool {
	return errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		strings.Contains(err.Error(), "leadership transfer timeout")
}

// settle waits before transfer retry attempt: until a leader other than
// this node is known, or 20ms doubling up to 320ms, or ctx's end.
func (g *Group) settle(ctx context.Context, attempt int) error {
	t := time.NewTimer(20 * time.Millisecond << min(attempt, 4))
	defer t.Stop()
	for {
		changed := g.leaderChange()
		if l := g.Leader(); l != "" && l != g.node {
			return nil
		}
		select {
		case <-changed:
		case <-t.C:
			return nil
		case <-g.done:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitRaw is wait without mapping raft's errors.
func (g *Group) waitRaw(ctx context.Context, start func() raft.Future) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f := start()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
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
