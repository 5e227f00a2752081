package raftgroup

import "github.com/hashicorp/raft"

// Failure detection per node, not per group: the Network reports a peer
// unreachable once for all groups (Network.Watch). When that peer leads
// this group, the group shortens its heartbeat and election timeouts to
// the leader lease until a leader is known again, so its followers elect
// within about a lease (default 500ms) instead of a heartbeat timeout:
// thousands of idle groups can run with long timers and still fail over
// fast. A false alarm costs at most an early election, which pre-vote
// refuses while the other members still hear from the leader. The same
// shortening makes a group whose only member is this node elect itself
// at once when it opens.

// peerChanged is the group's Network.Watch callback.
func (g *Group) peerChanged(node string, up bool) {
	if up || node == g.node || node != g.Leader() {
		return
	}
	g.hurry("the leader's node is unreachable", node)
}

// hurry shortens the heartbeat and election timeouts to the leader lease
// until a leader is known. A follower that has not heard from a leader
// for that long starts an election at once.
func (g *Group) hurry(why, leader string) {
	g.hurryMu.Lock()
	defer g.hurryMu.Unlock()
	if g.hurried || g.timing.LeaderLeaseTimeout >= g.timing.HeartbeatTimeout {
		return
	}
	// The election timeout too: after a split vote the candidates retry
	// within a lease as well.
	rc := g.r().ReloadableConfig()
	rc.HeartbeatTimeout = g.timing.LeaderLeaseTimeout
	rc.ElectionTimeout = g.timing.LeaderLeaseTimeout
	if err := g.r().ReloadConfig(rc); err != nil {
		g.log.Warn("raftgroup: cannot shorten the heartbeat timeout", "why", why, "error", err)
		return
	}
	g.hurried = true
	g.log.Info("raftgroup: electing within a lease", "why", why, "leader", leader, "timeout", rc.HeartbeatTimeout)
}

// hurryAlone makes a group whose configuration is this node alone elect
// itself at once rather than after a heartbeat timeout (a single node's
// start, or a bootstrap).
func (g *Group) hurryAlone() {
	f := g.r().GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	if len(servers) == 1 && servers[0].ID == raft.ServerID(g.node) && servers[0].Suffrage == raft.Voter {
		g.hurry("this node is the only member", "")
	}
}

// leaderKnown restores the configured heartbeat timeout once a leader is
// known again (called at each observation and every second: raft drops
// observations when the channel is full).
func (g *Group) leaderKnown() {
	if g.Leader() == "" {
		return
	}
	g.hurryMu.Lock()
	defer g.hurryMu.Unlock()
	if !g.hurried {
		return
	}
	rc := g.r().ReloadableConfig()
	rc.HeartbeatTimeout = g.timing.HeartbeatTimeout
	rc.ElectionTimeout = g.timing.ElectionTimeout
	if err := g.r().ReloadConfig(rc); err != nil {
		g.log.Warn("raftgroup: cannot restore the heartbeat timeout", "error", err)
		return
	}
	g.hurried = false
}
