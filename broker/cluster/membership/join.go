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
// leader is asked first whether it would admit this node; then reset
// wipes this node's own state (its metadata and group, which the caller
// checked hold nothing worth keeping), and the node asks to be added and
// receives the cluster's state. It returns the name of the node at addr.
//
// Refused (FailedPrecondition) when this node's group has other members:
// leave that cluster first. When the join fails after the reset, this
// node forms a cluster of its own again (empty: the caller recreates its
// defaults) and the error says so.
func (m *Membership) Join(ctx context.Context, addr string, reset func(ctx context.Context) error) (string, error) {
	self := m.cfg.Self.Name
	servers, err := m.cfg.Group.Configuration(ctx)
	if err != nil {
		return "", toStatus(err)
	}
	if len(servers) != 1 || servers[0].Node != self {
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
	m.log.Warn("cluster: joining another cluster: this node's own metadata is wiped", "node", self, "via", peer)
	if err := reset(ctx); err != nil {
		return "", fmt.Errorf("membership: join: reset this node: %w", err)
	}
	joined, err := m.joinVia(ctx, peer)
	if joined {
		m.log.Info("cluster: joined", "node", self, "via", peer)
		return peer, nil
	}
	m.log.Error("cluster: join failed after this node was reset; forming a cluster of its own again", "node", self, "via", peer, "error", err)
	// A bootstrap is refused when the other cluster's leader reached this
	// node after all (its state is no longer empty): it is a member then.
	if _, ferr := m.form(context.WithoutCancel(ctx)); ferr != nil {
		return "", status.Errorf(status.Code(err), "membership: join via %s: %v (this node was reset; forming a cluster of its own again failed too: %v; see warren ctl cluster-status)", peer, status.Convert(err).Message(), ferr)
	}
	return "", status.Errorf(status.Code(err), "membership: join via %s: %v (this node was reset and formed a cluster of its own again)", peer, status.Convert(err).Message())
}

// handleCheckJoin answers whether the leader would admit the node (see
// admit); a member that is not the leader passes the question on.
func (m *Membership) handleCheckJoin(ctx context.Context, from string, req []byte) ([]byte, error) {
	var jr joinRequest
	if err := json.Unmarshal(req, &jr); err != nil || jr.Node.Name == "" || jr.Node.Address == "" {
		return nil, status.Error(codes.InvalidArgument, "membership: a join needs the node's name and address")
	}
	if !m.Joined() {
		return nil, status.Error(codes.FailedPrecondition, "membership: this node is not in a cluster yet")
	}
	leader := m.cfg.Group.Leader()
	if leader == "" {
		return nil, status.Error(codes.Unavailable, "membership: the cluster has no leader now")
	}
	if leader != m.cfg.Self.Name {
		return m.cfg.Network.Call(ctx, leader, MethodCheckJoin, req)
	}
	return nil, m.checkAdmit(ctx, jr.Node, true)
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
