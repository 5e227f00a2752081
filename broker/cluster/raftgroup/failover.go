package raftgroup

// Failure detection per node, not per group: the Network reports a peer
// unreachable once for all groups (Network.Watch). When that peer leads
// this group, the group shortens its heartbeat and election timeouts to
// the leader lease until a leader is known again, so its followers elect within about a
// lease (default 500ms) instead of a heartbeat timeout: thousands of idle
// groups can run with long timers and still fail over fast. A false alarm
// costs at most an early election, which pre-vote refuses while the
// other members still hear from the leader.

// peerChanged is the group's Network.Watch callback.
func (g *Group) peerChanged(node string, up bool) {
	if up || node == g.node || node != g.Leader() {
		return
	}
	g.hurryMu.Lock()
	defer g.hurryMu.Unlock()
	if g.hurried || g.timing.LeaderLeaseTimeout >= g.timing.HeartbeatTimeout {
		return
	}
	// The election timeout too: after a split vote the candidates retry
	// within a lease as well.
	rc := g.raft.ReloadableConfig()
	rc.HeartbeatTimeout = g.timing.LeaderLeaseTimeout
	rc.ElectionTimeout = g.timing.LeaderLeaseTimeout
	if err := g.raft.ReloadConfig(rc); err != nil {
		g.log.Warn("raftgroup: cannot shorten the heartbeat timeout after the leader's node went down", "leader", node, "error", err)
		return
	}
	g.hurried = true
	g.log.Info("raftgroup: the leader's node is unreachable: electing within a lease", "leader", node, "timeout", rc.HeartbeatTimeout)
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
	rc := g.raft.ReloadableConfig()
	rc.HeartbeatTimeout = g.timing.HeartbeatTimeout
	rc.ElectionTimeout = g.timing.ElectionTimeout
	if err := g.raft.ReloadConfig(rc); err != nil {
		g.log.Warn("raftgroup: cannot restore the heartbeat timeout", "error", err)
		return
	}
	g.hurried = false
}
