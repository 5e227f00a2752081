package raftgroup

import (
	"slices"

	"github.com/hashicorp/raft"
)

// Failure detection per node, not per group: the Network reports a peer
// unreachable once for all groups (Network.Watch). When that peer leads
// this group, the group shortens its heartbeat and election timeouts to
// the leader lease until a leader is known again, so its followers elect
// within about a lease (default 1.5s) instead of a heartbeat timeout:
// thousands of idle groups can run with long timers and still fail over
// fast. A false alarm costs at most an early election, which pre-vote
// refuses while the other members still hear from the leader. The same
// shortening makes a group whose only member is this node elect itself
// at once when it opens, and a group of several members that opens with
// a log (a restart) elect within a lease when no leader speaks to it: a
// whole cluster restarted elects as fast as one that lost its leader, and
// a node restarted into a running cluster hears the leader first.

// peerChanged is the group's Network.Watch callback.
func (g *Group) peerChanged(node string, up bool) {
	if node == g.node || node != g.Leader() {
		return
	}
	if up { // a false alarm, or a short one: the leader's node is back
		g.hurryMu.Lock()
		defer g.hurryMu.Unlock()
		if g.hurried && node == g.hurriedFrom {
			g.restoreLocked()
		}
		return
	}
	g.hurry("the leader's node is unreachable", node)
}

// hurry shortens the heartbeat and election timeouts to the leader lease
// until a leader other than leader (the one whose node is down; "" for
// none) is known. A follower that has not heard from a leader for that
// long starts an election at once.
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
	g.hurried, g.hurriedFrom = true, leader
	select {
	case g.hurrying <- struct{}{}:
	default:
	}
	g.log.Info("raftgroup: electing within a lease", "why", why, "leader", leader, "timeout", rc.HeartbeatTimeout)
}

// hurryAtOpen shortens the timeouts of a group that opens with a
// configuration this node votes in: alone, it elects itself at once (a
// single node's start, or a bootstrap); with others, it elects within a
// lease unless a leader speaks to it first.
func (g *Group) hurryAtOpen() {
	f := g.r().GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	voter := slices.ContainsFunc(servers, func(s raft.Server) bool {
		return s.ID == raft.ServerID(g.node) && s.Suffrage == raft.Voter
	})
	switch {
	case !voter:
	case len(servers) == 1:
		g.hurry("this node is the only member", "")
	default:
		g.hurry("no leader known yet", "")
	}
}

// leaderKnown restores the configured heartbeat timeout once a leader is
// known again (called at each observation and, while hurried, every
// second: raft drops observations when the channel is full), and reports
// whether the group is still hurried. The leader whose node went down
// does not count: a follower names it until its own (shortened) heartbeat
// timeout ends, and restoring the long one then would undo the hurry.
func (g *Group) leaderKnown() (hurried bool) {
	l := g.Leader()
	g.hurryMu.Lock()
	defer g.hurryMu.Unlock()
	if g.hurried && l != "" && l != g.hurriedFrom {
		g.restoreLocked()
	}
	return g.hurried
}

// restoreLocked puts the configured heartbeat and election timeouts back
// (under hurryMu).
func (g *Group) restoreLocked() {
	rc := g.r().ReloadableConfig()
	rc.HeartbeatTimeout = g.timing.HeartbeatTimeout
	rc.ElectionTimeout = g.timing.ElectionTimeout
	if err := g.r().ReloadConfig(rc); err != nil {
		g.log.Warn("raftgroup: cannot restore the heartbeat timeout", "error", err)
		return
	}
	g.hurried, g.hurriedFrom = false, ""
}
