package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/cluster/raftgroup"
)

// MethodCheckJoin asks a member whether its leader would add the asking
// node (warren ctl join checks before it wipes anything); it changes
// nothing.
const MethodCheckJoin = "membership.check_join"

// Join makes this node, alone in a cluster of its own, a member of the
// cluster the node listening at addr (its cluster address) belongs to,
// without a restart, as RabbitMQ's join_cluster does: the cluster's
// leader is asked first whether it would admit this node; then the join
// is recorded on disk (Config.JoinMarker), reset wipes this node's own
// state (its metadata and group, which the caller checked hold nothing
// worth keeping), and the node asks to be added and receives the
// cluster's state. It returns the name of the node at addr.
//
// Refused (FailedPrecondition) when this node's group has other members:
// leave that cluster first. After the reset the node forms a cluster of
// its own again only when the cluster refused it outright (it was never
// added). When the answer does not come (the link cut, a timeout: the
// leader may have added it), the node never forms a cluster of its own:
// that would make two clusters count it. It stays empty and keeps the
// marker, the cluster's leader reaches it if it was added, and Join
// answers Unavailable saying the outcome is unknown; a restart, or
// running Join again, asks the cluster again. Joins through this node
// are refused while its own join is under way.
func (m *Membership) Join(ctx context.Context, addr string, reset func(ctx context.Context) error) (string, error) {
	m.mu.Lock()
	if m.joining {
		m.mu.Unlock()
		return "", status.Error(codes.FailedPrecondition, "membership: a join of this node is under way")
	}
	m.joining = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.joining = false
		m.mu.Unlock()
	}()
	self := m.cfg.Self.Name
	servers, err := m.cfg.Group.Configuration(ctx)
	if err != nil {
		return "", toStatus(err)
	}
	// An empty group is a node whose earlier join's outcome is unknown:
	// it asks again (nothing to reset).
	awaiting := len(servers) == 0
	if !awaiting && (len(servers) != 1 || servers[0].Node != self) {
		return "", status.Errorf(codes.FailedPrecondition, "membership: this node is a member of a cluster of %d; to move it to another cluster, take it out first (warren ctl leave), empty its data directory and start it with cluster.seeds naming the other cluster", len(servers))
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	peer, err := m.cfg.Hello(hctx, addr)
	cancel()
	if err != nil {
		return "", status.Errorf(codes.Unavailable, "membership: no cluster node answers at %s: %v", addr, err)
	}
	if peer == self {
		return "", status.Errorf(codes.InvalidArgument, "membership: %s is this node", addr)
	}
	req, _ := json.Marshal(joinRequest{Node: m.cfg.Self})
	if _, err := m.cfg.Network.Call(ctx, peer, MethodCheckJoin, req); err != nil {
		return "", err
	}
	// From here on the join runs to its end even if the caller goes away:
	// stopping half-way is what could leave two clusters counting the node.
	jctx := context.WithoutCancel(ctx)
	if !awaiting {
		if err := m.writeMarker(joinMarker{Address: addr, Via: peer}); err != nil {
			return "", status.Error(codes.Internal, err.Error())
		}
		m.log.Warn("cluster: joining another cluster: this node's own metadata is wiped", "node", self, "via", peer)
		if err := reset(jctx); err != nil {
			// Nobody was asked to add this node yet: a group the reset
			// left empty forms a cluster of its own again.
			if m.awaiting(jctx) {
				if _, ferr := m.form(jctx); ferr != nil {
					return "", fmt.Errorf("membership: join: reset this node: %w (forming a cluster of its own again failed too: %v; restart the node)", err, ferr)
				}
			}
			m.removeMarker()
			return "", fmt.Errorf("membership: join: reset this node: %w", err)
		}
	}
	err = m.joinAsking(jctx, peer)
	if err == nil {
		m.log.Info("cluster: joined", "node", self, "via", peer)
		return peer, nil
	}
	if refusedOutright(err) {
		m.log.Error("cluster: the cluster refused this node after it was reset; forming a cluster of its own again", "node", self, "via", peer, "error", err)
		if _, ferr := m.form(jctx); ferr != nil {
			return "", status.Errorf(status.Code(err), "membership: join via %s: %v (this node was reset; forming a cluster of its own again failed too: %v; see warren ctl cluster-status)", peer, status.Convert(err).Message(), ferr)
		}
		m.removeMarker()
		return "", status.Errorf(status.Code(err), "membership: join via %s: %v (this node was reset and formed a cluster of its own again)", peer, status.Convert(err).Message())
	}
	m.log.Error("cluster: join outcome unknown: this node waits to be reached by the cluster's leader", "node", self, "via", peer, "error", err)
	return "", status.Errorf(codes.Unavailable, "membership: join via %s: %v; whether the cluster added this node is unknown: it stays empty (it does not form a cluster of its own) and the cluster's leader reaches it if it was added; see warren ctl cluster-status on both sides, then run warren ctl join again or restart this node (it asks the cluster again)", peer, status.Convert(err).Message())
}

// joinAttempts bounds how often Join asks again when an answer is lost.
const joinAttempts = 3

// joinAsking asks the member name to add this node until it is added or
// refused outright: a lost answer is asked again (adding a member twice
// changes nothing), and the node is in once the cluster's configuration
// reached it. Then the join marker goes.
func (m *Membership) joinAsking(ctx context.Context, name string) error {
	var err error
	for i := 0; i < joinAttempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(m.cfg.RetryInterval):
			}
		}
		if m.member(ctx) {
			break
		}
		if _, err = m.joinVia(ctx, name); err == nil || refusedOutright(err) {
			break
		}
	}
	if err != nil && !m.member(ctx) {
		return err
	}
	// Added: the marker goes once this node holds the configuration (a
	// kill -9 before that restarts it empty, and it asks again).
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !m.member(wctx) {
		select {
		case <-wctx.Done():
			m.log.Warn("cluster: added, but the cluster's configuration has not reached this node yet", "node", m.cfg.Self.Name)
			return nil
		case <-time.After(m.cfg.RetryInterval):
		}
	}
	m.removeMarker()
	return nil
}

// member reports whether this node's group holds a configuration that
// counts it (the leader's entries reached it).
func (m *Membership) member(ctx context.Context) bool {
	servers, err := m.cfg.Group.Configuration(ctx)
	return err == nil && slices.ContainsFunc(servers, func(s raftgroup.Server) bool { return s.Node == m.cfg.Self.Name })
}

// awaiting reports whether this node's group is empty: no cluster of its
// own, waiting to be added.
func (m *Membership) awaiting(ctx context.Context) bool {
	servers, err := m.cfg.Group.Configuration(ctx)
	return err == nil && len(servers) == 0
}

// Awaiting reports whether this node is in no cluster: its join's outcome
// is unknown and it waits to be added (or asked again).
func (m *Membership) Awaiting(ctx context.Context) bool { return m.awaiting(ctx) }

// Settle removes the join marker once this node's group holds a
// configuration that counts it (a join whose outcome was unknown, which
// the cluster's leader completed), and reports whether it did.
func (m *Membership) Settle(ctx context.Context) bool {
	if !m.member(ctx) {
		return false
	}
	m.removeMarker()
	return true
}

// refusedOutright reports whether a join's error is the cluster's refusal
// before it added the node (admit's checks), not a lost answer.
func refusedOutright(err error) bool {
	switch status.Code(err) {
	case codes.AlreadyExists, codes.PermissionDenied, codes.InvalidArgument:
		return true
	}
	return false
}

// resumeJoin is Start for an empty node that was killed mid-join (the
// marker is there): it never forms a cluster of its own, it asks the
// cluster it was joining until that cluster's configuration reaches it,
// or forms one when that cluster refuses it outright.
func (m *Membership) resumeJoin(ctx context.Context, mk joinMarker) error {
	self := m.cfg.Self.Name
	m.log.Warn("cluster: this node was stopped while joining a cluster; asking that cluster again (it does not form one of its own)", "node", self, "address", mk.Address, "marker", m.cfg.JoinMarker)
	for round := 0; ; round++ {
		if m.member(ctx) {
			m.removeMarker()
			m.setJoined()
			return nil
		}
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		name, err := m.cfg.Hello(hctx, mk.Address)
		cancel()
		if err == nil && name != self {
			_, err = m.joinVia(ctx, name)
			if refusedOutright(err) {
				m.log.Error("cluster: the cluster this node was joining refused it; forming a cluster of its own", "node", self, "via", name, "error", err)
				if ok, ferr := m.form(ctx); !ok {
					return ferr
				}
				m.removeMarker()
				m.setJoined()
				return nil
			}
		}
		if err != nil && round%10 == 0 {
			m.log.Info("cluster: not a member yet; asking the cluster it was joining again", "node", self, "address", mk.Address, "reason", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("membership: join: %w", ctx.Err())
		case <-time.After(m.cfg.RetryInterval):
		}
	}
}

// handleCheckJoin answers whether the leader would admit the node (see
// admit); a member that is not the leader passes the question on.
func (m *Membership) handleCheckJoin(ctx context.Context, from string, req []byte) ([]byte, error) {
	return m.atLeader(ctx, MethodCheckJoin, req, func(ctx context.Context, n Node) error { return m.checkAdmit(ctx, n, true) })
}

// checkAdmit refuses a node the leader must not add: a member's name with
// no directory entry or another incarnation (it lost its data and must be
// forgotten first); with joining, also a node that is a member already (a
// join would wipe the node's copy of this very cluster).
func (m *Membership) checkAdmit(ctx context.Context, n Node, joining bool) error {
	servers, err := m.cfg.Group.Configuration(ctx)
	if err != nil {
		return toStatus(err)
	}
	member := slices.ContainsFunc(servers, func(s raftgroup.Server) bool { return s.Node == n.Name })
	old, ok := m.cfg.Directory.Node(n.Name)
	if member && (!ok || old.ID != n.ID) {
		return status.Errorf(codes.AlreadyExists, "membership: node %s is a member with other data (its disk was replaced?); forget it first: warren ctl forget-node %s", n.Name, n.Name)
	}
	if joining && member {
		return status.Errorf(codes.AlreadyExists, "membership: node %s is a member of this cluster already", n.Name)
	}
	return nil
}
