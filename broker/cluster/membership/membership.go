package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/cluster/raftgroup"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// Method names of the node-level calls membership handles.
const (
	MethodJoin   = "membership.join"
	MethodForget = "membership.forget"
	// MethodAnnounce: a node that (re)starts tells each member where it
	// listens now, before the metadata can say so (see announce).
	MethodAnnounce = "membership.announce"
)

// Group is the metadata Raft group as membership uses it;
// *raftgroup.Group implements it.
type Group interface {
	// Fresh reports that the group had no state when it was opened: the
	// node has never been a member of a cluster.
	Fresh() bool
	Bootstrap(ctx context.Context) error
	Leader() string
	WaitLeader(ctx context.Context) (string, error)
	AddVoter(ctx context.Context, node string) error
	RemoveServer(ctx context.Context, node string) error
	TransferLeadership(ctx context.Context, node string) error
	Configuration(ctx context.Context) ([]raftgroup.Server, error)
}

// Directory is the replicated table of members (the metadata's nodes):
// name, the address peers dial and the incarnation id.
type Directory interface {
	PutNode(ctx context.Context, n Node) error
	DeleteNode(ctx context.Context, name string) error
	Node(name string) (Node, bool)
	Nodes() []Node
}

// Node is one member's entry in the Directory.
type Node struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	ID      string `json:"id"`
}

// Config wires a node's membership.
type Config struct {
	// Self is this node: its name, advertised address and incarnation id.
	Self Node
	// Seeds are host:port addresses of peers' cluster listeners (this
	// node's own may be among them).
	Seeds []string
	// DNS is a name whose records are the peers, with an optional :port
	// (default DefaultPort).
	DNS         string
	DefaultPort string
	// Lookup resolves DNS (net.DefaultResolver.LookupHost when nil).
	Lookup func(ctx context.Context, host string) ([]string, error)

	Network transport.Network
	// Hello connects to addr and returns the name of the node there,
	// remembering the address for it.
	Hello     func(ctx context.Context, addr string) (string, error)
	Group     Group
	Directory Directory
	// SetAddress tells the transport where a node listens (an announce).
	SetAddress func(node, addr string) error
	// Forgotten runs on the leader when a node is taken out (forget-node,
	// leave), after it left the configuration and before its directory
	// entry goes (so a retried forget runs it again): the server deletes the
	// records of the queues that lived on it. Optional.
	Forgotten func(ctx context.Context, node string) error
	Log       *slog.Logger
	// JoinMarker is the file Join records the cluster it joins in before
	// it wipes the node, removed once joined (or refused outright). A node
	// whose group is empty and that finds it at Start resumes the join and
	// never forms a cluster of its own. Optional ("": not recorded).
	JoinMarker string
	// RetryInterval is the pause between discovery rounds [1s].
	RetryInterval time.Duration
}

// Membership forms, joins and changes the cluster a node belongs to.
// Safe for concurrent use.
type Membership struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	joined  bool
	joining bool // a Join of this node is under way
}

// New registers membership's handlers on the network; Start does the rest.
func New(cfg Config) *Membership {
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	if cfg.Lookup == nil {
		cfg.Lookup = net.DefaultResolver.LookupHost
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	m := &Membership{cfg: cfg, log: cfg.Log}
	cfg.Network.Handle(MethodJoin, m.handleJoin)
	cfg.Network.Handle(MethodForget, m.handleForget)
	cfg.Network.Handle(MethodAnnounce, m.handleAnnounce)
	cfg.Network.Handle(MethodCheckJoin, m.handleCheckJoin)
	return m
}

// joinRequest is what a node asks of a member to be added.
type joinRequest struct {
	Node Node `json:"node"`
}

// Start makes this node a member and returns once it is one: a node with
// Raft state rejoins by itself (Raft resumes); a fresh node joins a formed
// cluster found through its seeds or DNS name, or forms one. It forms one
// when it has no seeds and no DNS name, or when every discovered peer
// answered, none is in a cluster, and this node's name is the smallest:
// so nodes started together from the same seed list form one cluster,
// never two. It returns ctx's error if ctx ends first.
func (m *Membership) Start(ctx context.Context) error {
	mk, marked, err := m.readMarker()
	if err != nil {
		return err
	}
	if marked && m.awaiting(ctx) {
		return m.resumeJoin(ctx, mk)
	}
	if marked {
		m.removeMarker() // killed before the reset wiped anything, or after the join
	}
	if !m.cfg.Group.Fresh() {
		m.setJoined()
		m.announce(ctx)
		go m.announceUntilLed(ctx)
		go m.refreshSelf(ctx)
		return nil
	}
	for round := 0; ; round++ {
		done, err := m.discoverRound(ctx, round)
		if done {
			m.setJoined()
			return nil
		}
		if err != nil && round%10 == 0 {
			m.log.Info("cluster: not a member yet; retrying", "node", m.cfg.Self.Name, "reason", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("membership: join: %w", ctx.Err())
		case <-time.After(m.cfg.RetryInterval):
		}
	}
}

func (m *Membership) setJoined() {
	m.mu.Lock()
	m.joined = true
	m.mu.Unlock()
}

// admitting refuses a node's join through this node while this node is
// not in a cluster yet, or is joining another one (its reset would wipe
// the configuration that adds the asking node).
func (m *Membership) admitting() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.joined {
		return status.Error(codes.FailedPrecondition, "membership: this node is not in a cluster yet")
	}
	if m.joining {
		return status.Error(codes.Unavailable, "membership: this node is joining another cluster; ask another member")
	}
	return nil
}

// Joined reports whether Start finished.
func (m *Membership) Joined() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.joined
}

// discoverRound tries once to join a formed cluster, and forms one when
// this node should. It reports whether the node is a member now.
func (m *Membership) discoverRound(ctx context.Context, round int) (bool, error) {
	addrs, lookupErr := m.peerAddrs(ctx)
	if len(addrs) == 0 && lookupErr == nil && len(m.cfg.Seeds) == 0 && m.cfg.DNS == "" {
		return m.form(ctx)
	}
	self := m.cfg.Self.Name
	allAnswered := lookupErr == nil
	var names []string
	var lastErr error = lookupErr
	for _, addr := range addrs {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		name, err := m.cfg.Hello(cctx, addr)
		cancel()
		if err != nil {
			allAnswered = false
			lastErr = fmt.Errorf("seed %s: %w", addr, err)
			continue
		}
		if name == self {
			continue
		}
		names = append(names, name)
		joined, err := m.joinVia(ctx, name)
		if joined {
			m.log.Info("cluster: joined", "node", self, "via", name)
			return true, nil
		}
		if err != nil && status.Code(err) != codes.FailedPrecondition {
			allAnswered = false
			lastErr = fmt.Errorf("join via %s: %w", name, err)
			if status.Code(err) == codes.AlreadyExists || status.Code(err) == codes.PermissionDenied {
				m.log.Error("cluster: refused", "node", self, "by", name, "reason", status.Convert(err).Message())
			}
		}
	}
	if allAnswered && (len(names) == 0 || self < slices.Min(names)) {
		return m.form(ctx)
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("waiting for %s to form the cluster", slices.Min(names))
	}
	return false, lastErr
}

// form bootstraps a one-member cluster of this node and records it.
func (m *Membership) form(ctx context.Context) (bool, error) {
	m.log.Info("cluster: forming a new cluster", "node", m.cfg.Self.Name)
	if err := m.cfg.Group.Bootstrap(ctx); err != nil {
		return false, fmt.Errorf("membership: bootstrap: %w", err)
	}
	if _, err := m.cfg.Group.WaitLeader(ctx); err != nil {
		return false, fmt.Errorf("membership: bootstrap: %w", err)
	}
	if err := m.cfg.Directory.PutNode(ctx, m.cfg.Self); err != nil {
		return false, fmt.Errorf("membership: record this node: %w", err)
	}
	return true, nil
}

// joinVia asks the member name to add this node.
func (m *Membership) joinVia(ctx context.Context, name string) (bool, error) {
	req, _ := json.Marshal(joinRequest{Node: m.cfg.Self})
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := m.cfg.Network.Call(cctx, name, MethodJoin, req); err != nil {
		return false, err
	}
	return true, nil
}

// peerAddrs is the seeds plus what the DNS name resolves to.
func (m *Membership) peerAddrs(ctx context.Context) ([]string, error) {
	addrs := slices.Clone(m.cfg.Seeds)
	if m.cfg.DNS == "" {
		return addrs, nil
	}
	host, port, err := net.SplitHostPort(m.cfg.DNS)
	if err != nil {
		host, port = m.cfg.DNS, m.cfg.DefaultPort
	}
	ips, err := m.cfg.Lookup(ctx, host)
	if err != nil {
		return addrs, fmt.Errorf("look up %s: %w", host, err)
	}
	for _, ip := range ips {
		addrs = append(addrs, net.JoinHostPort(ip, port))
	}
	return addrs, nil
}

// announce tells every member in the directory (as this node last knew
// it) and every seed where this node listens now. A restarted node may
// have a new address (a pod's new IP) that its peers cannot learn from the
// metadata: the metadata's update needs a leader, and the leader needs the
// address to reach this node. Best effort, each member at most 2 s.
func (m *Membership) announce(ctx context.Context) {
	req, _ := json.Marshal(m.cfg.Self)
	var wg sync.WaitGroup
	call := func(name string) {
		defer wg.Done()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := m.cfg.Network.Call(cctx, name, MethodAnnounce, req); err != nil {
			m.log.Debug("cluster: announce not delivered", "to", name, "error", err)
		}
	}
	seen := map[string]bool{m.cfg.Self.Name: true}
	for _, n := range m.cfg.Directory.Nodes() {
		if !seen[n.Name] {
			seen[n.Name] = true
			wg.Add(1)
			go call(n.Name)
		}
	}
	addrs, _ := m.peerAddrs(ctx)
	for _, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			name, err := m.cfg.Hello(cctx, addr)
			cancel()
			if err != nil || name == m.cfg.Self.Name {
				return
			}
			wg.Add(1)
			call(name)
		}()
	}
	wg.Wait()
}

// announceUntilLed announces again every few seconds until a leader has
// reached this node (members that were down at the first announce).
func (m *Membership) announceUntilLed(ctx context.Context) {
	for m.cfg.Group.Leader() == "" {
		select {
		case <-ctx.Done():
			return
		case <-time.After(3 * m.cfg.RetryInterval):
		}
		if m.cfg.Group.Leader() == "" {
			m.announce(ctx)
		}
	}
}

// handleAnnounce takes a member's new address for the transport (the
// metadata follows once the member's own directory update commits).
func (m *Membership) handleAnnounce(ctx context.Context, from string, req []byte) ([]byte, error) {
	var n Node
	if err := json.Unmarshal(req, &n); err != nil || n.Name == "" || n.Address == "" {
		return nil, status.Error(codes.InvalidArgument, "membership: an announce needs the node's name and address")
	}
	if n.Name != from {
		return nil, status.Errorf(codes.PermissionDenied, "membership: node %s announced an address for %s", from, n.Name)
	}
	if m.cfg.SetAddress == nil {
		return nil, nil
	}
	if err := m.cfg.SetAddress(n.Name, n.Address); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return nil, nil
}

// refreshSelf keeps this node's directory entry current (a new address
// after a move) once the cluster has a leader.
func (m *Membership) refreshSelf(ctx context.Context) {
	for {
		if n, ok := m.cfg.Directory.Node(m.cfg.Self.Name); ok && n == m.cfg.Self {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := m.cfg.Directory.PutNode(cctx, m.cfg.Self)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.cfg.RetryInterval):
		}
	}
}

// handleJoin adds the asking node; a member that is not the leader passes
// the request to the leader.
func (m *Membership) handleJoin(ctx context.Context, from string, req []byte) ([]byte, error) {
	return m.atLeader(ctx, MethodJoin, req, m.admit)
}

// atLeader decodes a join request (method's) and runs do on the leader:
// a member that is not the leader passes the request on unchanged.
func (m *Membership) atLeader(ctx context.Context, method string, req []byte, do func(context.Context, Node) error) ([]byte, error) {
	var jr joinRequest
	if err := json.Unmarshal(req, &jr); err != nil || jr.Node.Name == "" || jr.Node.Address == "" {
		return nil, status.Error(codes.InvalidArgument, "membership: a join needs the node's name and address")
	}
	if err := m.admitting(); err != nil {
		return nil, err
	}
	leader := m.cfg.Group.Leader()
	if leader == "" {
		return nil, status.Error(codes.Unavailable, "membership: the cluster has no leader now")
	}
	if leader != m.cfg.Self.Name {
		return m.cfg.Network.Call(ctx, leader, method, req)
	}
	return nil, do(ctx, jr.Node)
}

// admit runs on the leader: it records the node, then adds it as a voter.
// A name that is a member under another incarnation is refused: that node
// lost its data (and its Raft votes) and must be forgotten first.
func (m *Membership) admit(ctx context.Context, n Node) error {
	if err := m.checkAdmit(ctx, n, false); err != nil {
		return err
	}
	if err := m.cfg.Directory.PutNode(ctx, n); err != nil {
		return toStatus(err)
	}
	if err := m.cfg.Group.AddVoter(ctx, n.Name); err != nil {
		return toStatus(err)
	}
	m.log.Info("cluster: node added", "node", n.Name, "address", n.Address)
	return nil
}

// Forget removes node from the cluster (it must be stopped; its data is
// no longer part of the cluster). From any member: passed to the leader.
func (m *Membership) Forget(ctx context.Context, node string) error {
	if node == m.cfg.Self.Name {
		return status.Error(codes.InvalidArgument, "membership: a node cannot forget itself; use leave")
	}
	_, err := m.handleForget(ctx, m.cfg.Self.Name, []byte(node))
	return err
}

func (m *Membership) handleForget(ctx context.Context, from string, req []byte) ([]byte, error) {
	node := string(req)
	leader := m.cfg.Group.Leader()
	if leader == "" {
		return nil, status.Error(codes.Unavailable, "membership: the cluster has no leader now")
	}
	if leader != m.cfg.Self.Name {
		return m.cfg.Network.Call(ctx, leader, MethodForget, req)
	}
	if node == leader {
		if err := m.cfg.Group.TransferLeadership(ctx, ""); err != nil {
			return nil, toStatus(err)
		}
		return m.cfg.Network.Call(ctx, m.cfg.Group.Leader(), MethodForget, req)
	}
	servers, err := m.cfg.Group.Configuration(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	member := slices.ContainsFunc(servers, func(s raftgroup.Server) bool { return s.Node == node })
	_, listed := m.cfg.Directory.Node(node)
	if !member && !listed {
		return nil, status.Errorf(codes.NotFound, "membership: node %s is not a member", node)
	}
	if member {
		if err := m.cfg.Group.RemoveServer(ctx, node); err != nil {
			return nil, toStatus(err)
		}
	}
	if m.cfg.Forgotten != nil {
		if err := m.cfg.Forgotten(ctx, node); err != nil {
			return nil, toStatus(err)
		}
	}
	if listed {
		if err := m.cfg.Directory.DeleteNode(ctx, node); err != nil {
			return nil, toStatus(err)
		}
	}
	m.log.Info("cluster: node forgotten", "node", node)
	return nil, nil
}

// Leave takes this node out of the cluster: leadership moves away first,
// then the node is removed from the configuration and the directory. The
// node should stop afterwards; to come back it must be reset (its data
// directory emptied) and join again.
func (m *Membership) Leave(ctx context.Context) error {
	self := m.cfg.Self.Name
	servers, err := m.cfg.Group.Configuration(ctx)
	if err != nil {
		return toStatus(err)
	}
	others := slices.ContainsFunc(servers, func(s raftgroup.Server) bool { return s.Voter && s.Node != self })
	if !others {
		return status.Error(codes.FailedPrecondition, "membership: this node is the only member of its cluster; there is nothing to leave")
	}
	if m.cfg.Group.Leader() == self {
		if err := m.cfg.Group.TransferLeadership(ctx, ""); err != nil {
			return fmt.Errorf("membership: leave: move leadership away: %w", err)
		}
	}
	leader, err := m.cfg.Group.WaitLeader(ctx)
	if err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	if leader == self {
		return status.Error(codes.Unavailable, "membership: leave: leadership did not move away")
	}
	if _, err := m.cfg.Network.Call(ctx, leader, MethodForget, []byte(self)); err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	return nil
}

// toStatus keeps a status error and wraps any other as Unavailable (the
// leader's raft refused: not leader any more, shut down, timed out).
func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unavailable, err.Error())
}
