package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/mgmt"
)

// ClusterStatus implements mgmt.Cluster: the metadata group's members and
// the directory's, each with its address and whether this node reaches it.
func (b *Broker) ClusterStatus(ctx context.Context) (mgmt.ClusterStatus, error) {
	c := b.cluster
	servers, err := c.meta.Group().Configuration(ctx)
	if err != nil {
		return mgmt.ClusterStatus{}, status.Error(codes.Unavailable, err.Error())
	}
	st := mgmt.ClusterStatus{Node: c.self.Name, MetadataLeader: c.meta.Group().Leader()}
	seen := map[string]bool{}
	recs := map[string]meta.Node{}
	for _, n := range c.meta.Nodes() {
		recs[n.Name] = n
	}
	for _, s := range servers {
		seen[s.Node] = true
		r := recs[s.Node]
		st.Nodes = append(st.Nodes, mgmt.ClusterNode{Name: s.Node, Address: r.Address, Voter: s.Voter, Running: c.reachable(s.Node), BeingDrained: r.Draining})
	}
	for name, r := range recs {
		if !seen[name] { // recorded, not (yet or any more) in the configuration
			st.Nodes = append(st.Nodes, mgmt.ClusterNode{Name: name, Address: r.Address, Running: c.reachable(name), BeingDrained: r.Draining})
		}
	}
	for i := range st.Nodes {
		if st.Nodes[i].Name == c.self.Name {
			st.Nodes[i].BeingDrained = st.Nodes[i].BeingDrained || c.draining.Load()
		}
	}
	slices.SortFunc(st.Nodes, func(a, b mgmt.ClusterNode) int { return cmpString(a.Name, b.Name) })
	return st, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ForgetNode implements mgmt.Cluster.
func (b *Broker) ForgetNode(ctx context.Context, name string) error {
	return b.cluster.members.Forget(ctx, name)
}

// Leave implements mgmt.Cluster.
func (b *Broker) Leave(ctx context.Context) error { return b.cluster.members.Leave(ctx) }

// Draining implements mgmt.Cluster.
func (b *Broker) Draining() bool { return b.cluster.draining.Load() }

// Drain implements mgmt.Cluster: leaderships move to other nodes, then the
// node closes its client listeners and connections (clients reconnect to
// another node); it stays a member and keeps its data. Refused on the only
// member: its clients would have nowhere to go (stop it instead).
func (b *Broker) Drain(ctx context.Context) error {
	if b.voters(ctx) <= 1 {
		return status.Error(codes.FailedPrecondition, "the only member of its cluster cannot be drained: its clients would have nowhere to go (stop the node instead)")
	}
	return b.drain(ctx)
}

// drain does Drain; Shutdown runs it too (SIGTERM drains first).
func (b *Broker) drain(ctx context.Context) error {
	c := b.cluster
	if c.draining.Swap(true) {
		return nil
	}
	b.ready.Store(false)
	b.log.Info("cluster: draining: moving leaderships away, then closing client listeners", "node", c.self.Name)
	if err := b.moveLeadership(ctx); err != nil {
		return err
	}
	b.closeClientListeners()
	if err := b.AMQP.Shutdown(ctx); err != nil {
		return fmt.Errorf("server: drain: %w", err)
	}
	if err := b.Stream.Shutdown(ctx); err != nil {
		return fmt.Errorf("server: drain: %w", err)
	}
	if err := c.setDraining(ctx, true); err != nil {
		b.log.Warn("cluster: drained, but the other members were not told", "error", err)
	}
	b.log.Info("cluster: drained", "node", c.self.Name)
	return nil
}

// moveLeadership hands every group this node leads to another voter (the
// metadata group today), so a stop never makes a group wait for an
// election.
func (b *Broker) moveLeadership(ctx context.Context) error {
	c := b.cluster
	g := c.meta.Group()
	if g.Leader() != c.self.Name || b.voters(ctx) <= 1 {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.TransferLeadership(tctx, ""); err != nil {
		return fmt.Errorf("server: move the metadata leadership away: %w", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	to, _ := g.WaitLeader(wctx)
	wcancel()
	b.log.Info("cluster: metadata leadership moved", "from", c.self.Name, "to", to)
	return nil
}

// voters counts the metadata group's voters (0 when unknown).
func (b *Broker) voters(ctx context.Context) int {
	servers, err := b.cluster.meta.Group().Configuration(ctx)
	if err != nil {
		return 0
	}
	n := 0
	for _, s := range servers {
		if s.Voter {
			n++
		}
	}
	return n
}

// Decommission implements mgmt.Cluster: drain, move this node's
// memberships to other nodes (the metadata group has every node: nothing
// to move yet), then leave. Stop the node afterwards.
func (b *Broker) Decommission(ctx context.Context) error {
	if b.voters(ctx) <= 1 {
		return status.Error(codes.FailedPrecondition, "the only member of its cluster cannot be decommissioned")
	}
	if err := b.drain(ctx); err != nil {
		return err
	}
	return b.cluster.members.Leave(ctx)
}

// CallNode implements mgmt.Cluster.
func (b *Broker) CallNode(ctx context.Context, node, method string, req []byte) ([]byte, error) {
	return b.cluster.net.Call(ctx, node, method, req)
}

// HandleNode implements mgmt.Cluster.
func (b *Broker) HandleNode(method string, h func(ctx context.Context, req []byte) ([]byte, error)) {
	b.cluster.net.Handle(method, func(ctx context.Context, _ string, req []byte) ([]byte, error) { return h(ctx, req) })
}

// ClusterAddr is the cluster listener's address (useful with port 0).
func (b *Broker) ClusterAddr() net.Addr { return b.cluster.net.Addr() }
