package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
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
func (b *Broker) Leave(ctx context.Context) error {
	if err := b.othersHoldAMajority(ctx); err != nil {
		return err
	}
	return b.cluster.members.Leave(ctx)
}

// othersHoldAMajority refuses to take this node out of the metadata group
// when the voters that would remain do not reach a majority of themselves:
// the shrunk configuration could then commit nothing until a stopped
// member came back, though the cluster works now.
func (b *Broker) othersHoldAMajority(ctx context.Context) error {
	st, err := b.ClusterStatus(ctx)
	if err != nil {
		return err
	}
	remain, running := 0, 0
	var down []string
	for _, n := range st.Nodes {
		if !n.Voter || n.Name == b.cluster.self.Name {
			continue
		}
		remain++
		if n.Running {
			running++
		} else {
			down = append(down, n.Name)
		}
	}
	if remain > 0 && running < remain/2+1 {
		return status.Errorf(codes.FailedPrecondition, "the other members would not hold a majority without this node (%d of %d running; down: %v): bring them back first", running, remain, down)
	}
	return nil
}

// queuesHeldHere lists the queues and streams whose records place them on
// this node (their contents live only here).
func (b *Broker) queuesHeldHere() []string {
	var out []string
	for _, v := range b.meta.Vhosts() {
		for _, q := range b.meta.Queues(v.Name) {
			if q.Node == b.cluster.self.Name {
				out = append(out, fmt.Sprintf("'%s' in vhost '%s'", q.Name, v.Name))
			}
		}
	}
	return out
}

// Draining implements mgmt.Cluster.
func (b *Broker) Draining() bool { return b.cluster.draining.Load() }

// Drain implements mgmt.Cluster: leaderships move to other nodes, then the
// node closes its client listeners and connections (clients reconnect to
// another node); it stays a member and keeps its data. The only member of
// its cluster drains too (the operator's preStop hook runs drain on every
// pod, a single replica's as well): it has no leadership to hand over and
// its clients nowhere to go until it is back, but it stops taking them
// before it stops.
func (b *Broker) Drain(ctx context.Context) error {
	return b.drain(ctx)
}

// drain does Drain; Shutdown runs it too (SIGTERM drains first).
func (b *Broker) drain(ctx context.Context) error {
	c := b.cluster
	if c.draining.Swap(true) {
		return nil
	}
	b.ready.Store(false)
	if b.voters(ctx) <= 1 {
		b.log.Info("cluster: draining the only member of its cluster: no leadership to move; closing client listeners (its clients reconnect once it is back)", "node", c.self.Name)
	} else {
		b.log.Info("cluster: draining: moving leaderships away, then closing client listeners", "node", c.self.Name)
	}
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
// to move yet), then leave. Stop the node afterwards. Refused while queues
// or streams live on this node (classic queues and streams are not
// replicated yet: their messages would go with the node), and when the
// other members would not hold a majority.
func (b *Broker) Decommission(ctx context.Context) error {
	if b.voters(ctx) <= 1 {
		return status.Error(codes.FailedPrecondition, "the only member of its cluster cannot be decommissioned")
	}
	if held := b.queuesHeldHere(); len(held) > 0 {
		if len(held) > 10 {
			held = append(held[:10], fmt.Sprintf("and %d more", len(held)-10))
		}
		return status.Errorf(codes.FailedPrecondition, "%d queues and streams live on this node and would lose their messages: %s; delete or move them first", len(held), strings.Join(held, ", "))
	}
	if err := b.othersHoldAMajority(ctx); err != nil {
		return err
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

// NodeRunning reports whether member node answers its pings (this node
// always does).
func (b *Broker) NodeRunning(node string) bool { return b.cluster.reachable(node) }

// HandleNode implements mgmt.Cluster.
func (b *Broker) HandleNode(method string, h func(ctx context.Context, req []byte) ([]byte, error)) {
	b.cluster.net.Handle(method, func(ctx context.Context, _ string, req []byte) ([]byte, error) { return h(ctx, req) })
}

// ClusterAddr is the cluster listener's address (useful with port 0).
func (b *Broker) ClusterAddr() net.Addr { return b.cluster.net.Addr() }
