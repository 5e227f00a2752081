package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/membership"
	"github.com/warrenmq/warren/broker/cluster/raftgroup"
	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/meta"
)

// clusterNode is this node's part of its cluster: the log store every Raft
// group on the node writes, the link to the peers, the metadata group and
// membership. A node alone is a cluster of one: the same parts.
type clusterNode struct {
	self    membership.Node
	logs    *logstore.Store
	net     *transport.GRPCNetwork
	meta    *meta.Raft
	members *membership.Membership
	peers   *peerBook
	log     *slog.Logger

	unwatch func()
	unsub   func()

	draining atomic.Bool

	upMu      sync.Mutex
	up        map[string]bool      // peers the transport reports reachable
	downSince map[string]time.Time // peers reported down, and when (cleared when up)
	stopSweep chan struct{}        // closed by close: ends sweepDownNodes
	wentDown  chan struct{}        // a peer was reported down (wakes sweepDownNodes)
}

// openCluster starts the node's cluster parts and returns once the node is
// a member with the metadata caught up: a fresh node joins the cluster its
// seeds or DNS name lead to (or forms one), a node with state rejoins. It
// returns ctx's error if ctx ends first (a SIGTERM while waiting for peers).
func openCluster(ctx context.Context, cfg config.Config, log *slog.Logger) (c *clusterNode, err error) {
	cl := cfg.Cluster
	log = log.With("subsystem", "cluster")
	id, err := nodeIncarnation(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	secret, err := cl.LoadSecret()
	if err != nil {
		return nil, err
	}
	tlsCfg, _, err := cl.TLS.TLSConfigs()
	if err != nil {
		return nil, err
	}
	nw, err := transport.NewGRPC(transport.Config{Node: cl.NodeName, Addr: cl.Listen, Secret: string(secret), TLS: tlsCfg, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("server: cluster listener: %w", err)
	}
	c = &clusterNode{net: nw, log: log, up: map[string]bool{}, downSince: map[string]time.Time{}, stopSweep: make(chan struct{}), wentDown: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			_ = c.close()
			c = nil
		}
	}()
	advertise, err := advertiseAddr(cl, nw.Addr())
	if err != nil {
		return c, err
	}
	c.self = membership.Node{Name: cl.NodeName, Address: advertise, ID: id}
	c.unwatch = nw.Watch(c.peerChanged)
	if c.logs, err = logstore.Open(ctx, cfg.Path("raft"), logstore.Options{Logger: log}); err != nil {
		return c, fmt.Errorf("server: open the raft log store: %w", err)
	}
	c.peers = openPeerBook(cfg.Path("raft", "peers.json"), nw, log)
	if c.meta, err = meta.OpenRaft(ctx, meta.RaftConfig{Dir: cfg.Path("meta"), Network: nw, Stores: c.logs, Logger: log, WriteTimeout: cl.MetadataWriteTimeout, AdoptAlone: len(cl.Seeds) == 0 && cl.DNS == "", Incarnation: id}); err != nil {
		if errors.Is(err, raftgroup.ErrNotMember) {
			return c, fmt.Errorf("server: %w; if it was removed from its cluster (leave, forget-node), empty its data directory to join again as a new member; if cluster.node_name changed, set it back", err)
		}
		return c, fmt.Errorf("server: open metadata: %w", err)
	}
	c.peers.learn(c.meta.Nodes())
	c.unsub = c.meta.Subscribe(func(e meta.Event) {
		if e.Kind == meta.NodePut || e.Kind == meta.NodeDeleted || e.Kind == meta.Reset {
			c.peers.learn(c.meta.Nodes())
		}
	})
	_, port, _ := net.SplitHostPort(cl.Listen)
	c.members = membership.New(membership.Config{
		Self: c.self, Seeds: cl.Seeds, DNS: cl.DNS, DefaultPort: port,
		Network: nw, Hello: c.hello, Group: metaGroup{c.meta}, Directory: metaDirectory{c.meta}, Log: log,
		SetAddress: nw.SetAddress, Forgotten: c.forgotten, JoinMarker: cfg.Path("raft", "joining.json"),
	})
	if err := c.members.Start(ctx); err != nil {
		return c, fmt.Errorf("server: %w", err)
	}
	start := time.Now()
	if err := c.meta.Sync(ctx); err != nil {
		return c, fmt.Errorf("server: catch up with the cluster's metadata: %w", err)
	}
	if err := c.forgetStaleNames(ctx); err != nil {
		return c, err
	}
	if err := c.setDraining(ctx, false); err != nil {
		return c, err
	}
	go c.sweepDownNodes(c.stopSweep)
	log.Info("cluster: member", "node", cl.NodeName, "address", advertise, "metadata_leader", c.meta.Group().Leader(), "sync", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// setDraining records in the metadata whether this node is drained, so
// every member (and the operator) sees it; a node that starts is not.
func (c *clusterNode) setDraining(ctx context.Context, draining bool) error {
	for _, n := range c.meta.Nodes() {
		if n.Name != c.self.Name || n.Draining == draining {
			continue
		}
		n.Draining = draining
		if err := c.meta.PutNode(ctx, n); err != nil {
			return fmt.Errorf("server: record this node as drained=%v: %w", draining, err)
		}
	}
	return nil
}

// forgetStaleNames removes, in a cluster of one, the directory entries of
// this node's old names (its incarnation id under another name, not a
// member): the old name of a renamed node, whose queue records it adopts
// first (their files are in its data directory). Another node's entry is
// left alone: a node joining right now is recorded before it is added as a
// voter, and forgetting it would leave a voter without an address.
func (c *clusterNode) forgetStaleNames(ctx context.Context) error {
	g := c.meta.Group()
	if !g.IsLeader() {
		return nil
	}
	servers, err := g.Configuration(ctx)
	if err != nil || len(servers) != 1 {
		return nil
	}
	for _, n := range c.meta.Nodes() {
		if n.Name == servers[0].Node || n.ID != c.self.ID {
			continue
		}
		c.log.Info("cluster: this node was renamed: adopting the queues of its old name, then forgetting it", "old", n.Name, "node", c.self.Name)
		for _, v := range c.meta.Vhosts() {
			for _, q := range c.meta.Queues(v.Name) {
				if q.Node != n.Name {
					continue
				}
				q.Node = c.self.Name
				if err := c.meta.PutQueue(ctx, q); err != nil {
					return fmt.Errorf("server: adopt queue '%s' in vhost '%s' of the old name %s: %w", q.Name, v.Name, n.Name, err)
				}
			}
		}
		if err := c.meta.DeleteNode(ctx, n.Name); err != nil {
			return fmt.Errorf("server: forget %s: %w", n.Name, err)
		}
	}
	return nil
}

// forgotten runs on the metadata leader when node is taken out of the
// cluster (forget-node, leave): the records of the queues and streams that
// lived on it are deleted with their bindings, as RabbitMQ's
// forget_cluster_node deletes a removed node's classic queues. Their
// messages were only on that node: it is gone from the cluster, and a
// record left behind would be a queue nobody can use or re-declare.
func (c *clusterNode) forgotten(ctx context.Context, node string) error {
	// A record changed between the list and its delete (deleted, declared
	// again) is looked at again as it is then, a few times.
	for pass := 0; ; pass++ {
		changed, err := c.forgetQueuesOf(ctx, node)
		if err != nil || !changed {
			return err
		}
		if pass == 2 {
			return fmt.Errorf("server: the queues of the removed node %s kept changing while they were deleted; forget it again", node)
		}
	}
}

// forgetQueuesOf is one pass of forgotten: changed says whether a record
// was not deleted because it changed since the list was read.
func (c *clusterNode) forgetQueuesOf(ctx context.Context, node string) (changed bool, _ error) {
	var errs []error
	for _, v := range c.meta.Vhosts() {
		for _, q := range c.meta.Queues(v.Name) {
			if q.Node != node {
				continue
			}
			// Only the record listed (a queue declared again under its
			// name on another node since stays).
			q.Vhost = v.Name
			deleted, err := c.meta.DeleteQueueIf(ctx, q)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("server: delete queue '%s' in vhost '%s' of the removed node %s: %w", q.Name, v.Name, node, err))
			case deleted:
				c.log.Warn("cluster: deleted a queue of the removed node (its messages were on that node)", "queue", q.Name, "vhost", v.Name, "node", node)
			default:
				changed = true
			}
		}
	}
	return changed, errors.Join(errs...)
}

// advertiseAddr is cluster.advertise, else the listener's own address when
// it is bound to a specific IP (a port of 0 made concrete), else the
// hostname with the listener's port.
func advertiseAddr(cl config.Cluster, bound net.Addr) (string, error) {
	if cl.Advertise != "" {
		return cl.Advertise, nil
	}
	host, _, err := net.SplitHostPort(cl.Listen)
	if err != nil {
		return "", fmt.Errorf("server: cluster.listen: %w", err)
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return bound.String(), nil
	}
	_, port, _ := net.SplitHostPort(bound.String())
	cl.Listen = net.JoinHostPort(host, port)
	return cl.AdvertiseAddr()
}

// hello asks who listens at addr (a seed) and remembers the address under
// that name, so membership can call the node by name.
func (c *clusterNode) hello(ctx context.Context, addr string) (string, error) {
	name, err := c.net.Hello(ctx, addr)
	if err != nil {
		return "", err
	}
	if name != c.self.Name {
		if err := c.net.SetAddress(name, addr); err != nil {
			return "", err
		}
	}
	return name, nil
}

func (c *clusterNode) peerChanged(node string, up bool) {
	c.upMu.Lock()
	c.up[node] = up
	if up {
		delete(c.downSince, node)
	} else if _, ok := c.downSince[node]; !ok {
		c.downSince[node] = time.Now()
		select {
		case c.wentDown <- struct{}{}:
		default:
		}
	}
	c.upMu.Unlock()
}

func (c *clusterNode) reachable(node string) bool {
	if node == c.self.Name {
		return true
	}
	c.upMu.Lock()
	defer c.upMu.Unlock()
	return c.up[node]
}

// close stops the node's cluster parts, the metadata group first (this
// node's part of it: the others keep it).
func (c *clusterNode) close() error {
	var errs []error
	if c.stopSweep != nil {
		close(c.stopSweep)
		c.stopSweep = nil
	}
	if c.unsub != nil {
		c.unsub()
	}
	if c.meta != nil {
		errs = append(errs, c.meta.Close())
	}
	if c.unwatch != nil {
		c.unwatch()
	}
	if c.net != nil {
		errs = append(errs, c.net.Close())
	}
	if c.logs != nil {
		errs = append(errs, c.logs.Close())
	}
	return errors.Join(errs...)
}

// metaGroup is the metadata group as membership uses it: its Bootstrap is
// the store's (which also migrates a single-node meta.log).
type metaGroup struct{ r *meta.Raft }

func (g metaGroup) Fresh() bool                         { return g.r.Group().Fresh() }
func (g metaGroup) Bootstrap(ctx context.Context) error { return g.r.Bootstrap(ctx) }
func (g metaGroup) Leader() string                      { return g.r.Group().Leader() }
func (g metaGroup) WaitLeader(ctx context.Context) (string, error) {
	return g.r.Group().WaitLeader(ctx)
}
func (g metaGroup) AddVoter(ctx context.Context, node string) error {
	return g.r.Group().AddVoter(ctx, node)
}
func (g metaGroup) RemoveServer(ctx context.Context, node string) error {
	return g.r.Group().RemoveServer(ctx, node)
}
func (g metaGroup) TransferLeadership(ctx context.Context, node string) error {
	return g.r.Group().TransferLeadership(ctx, node)
}
func (g metaGroup) Configuration(ctx context.Context) ([]raftgroup.Server, error) {
	return g.r.Group().Configuration(ctx)
}

// metaDirectory is the metadata's node table as membership's Directory.
type metaDirectory struct{ r *meta.Raft }

func (d metaDirectory) PutNode(ctx context.Context, n membership.Node) error {
	return d.r.PutNode(ctx, meta.Node{Name: n.Name, Address: n.Address, ID: n.ID})
}
func (d metaDirectory) DeleteNode(ctx context.Context, name string) error {
	return d.r.DeleteNode(ctx, name)
}
func (d metaDirectory) Nodes() []membership.Node {
	var out []membership.Node
	for _, n := range d.r.Nodes() {
		out = append(out, membership.Node{Name: n.Name, Address: n.Address, ID: n.ID})
	}
	return out
}

func (d metaDirectory) Node(name string) (membership.Node, bool) {
	for _, n := range d.r.Nodes() {
		if n.Name == name {
			return membership.Node{Name: n.Name, Address: n.Address, ID: n.ID}, true
		}
	}
	return membership.Node{}, false
}
