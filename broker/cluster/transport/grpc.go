package transport

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Config configures a gRPC Network.
type Config struct {
	// Node is this node's name (cluster.node_name): required.
	Node string
	// Listener is where peers connect; if nil, Addr is listened on.
	Listener net.Listener
	// Addr is the "host:port" listened on when Listener is nil.
	Addr string
	// Secret is the join secret every peer must present: required.
	Secret string
	// TLS, if set, secures every connection with mutual TLS: both ends
	// present its Certificates (which need the serverAuth and clientAuth
	// usages) and verify the other's against its CAs (ClientCAs, else
	// RootCAs, on the listening side; RootCAs, else ClientCAs, on the
	// dialling side, checked against the host of the dialled address).
	TLS *tls.Config
	// Logger gets refused peers, malformed messages and connection changes.
	Logger *slog.Logger
	// RPCTimeout bounds one Raft RPC (default DefaultRPCTimeout).
	RPCTimeout time.Duration
	// MaxMessageBytes bounds one message (an AppendEntries with its
	// entries, a call's request or answer); default DefaultMaxMessageBytes.
	MaxMessageBytes int
	// PingInterval: a peer not heard from for this long (no frame from
	// it on any stream) gets a node heartbeat (default 1 s: no shorter
	// than the period of raftgroup's leader heartbeats, which stand for it
	// between a leader and its followers); a peer that does not answer
	// one within PingTimeout of when it was last heard from (default 2 s)
	// is reported down (Watch) until it is heard from again. Of two nodes
	// with nothing else to say, the one whose name sorts first pings: the
	// other hears its pings.
	PingInterval, PingTimeout time.Duration
	// KeepaliveInterval is how often gRPC probes an idle connection; one
	// unanswered for another interval is closed (default 10 s, gRPC's
	// floor on the dialling side).
	KeepaliveInterval time.Duration
}

// DefaultMaxMessageBytes bounds one message by default: room for the
// broker's largest message (limits.max_message_size, at most 512 MiB) with
// its Raft framing.
const DefaultMaxMessageBytes = 512<<20 + 1<<20

// windowBytes is the HTTP/2 flow-control window of each connection and
// stream, both ways, fixed: the ceiling gRPC's dynamic window grows to.
// A dynamic window (gRPC's default) has each end answer a frame that
// arrives while no estimate is under way with a ping of its own (BDP
// estimation) and that ping's ack: on an idle cluster, every Raft
// heartbeat and its answer would cost two more packets and the wakeups of
// both processes' gRPC reader and writer goroutines.
const windowBytes = 16 << 20

// GRPCNetwork is the Network over gRPC: one connection to each peer with
// three streams on it (control, data, snapshot), and a server its peers
// connect to. See the package documentation.
type GRPCNetwork struct {
	core  *core
	log   *slog.Logger
	cfg   Config
	ln    net.Listener
	srv   *grpc.Server
	creds credentials.TransportCredentials // for dialling; nil: plaintext
	// With Config.TLS, the listening and the dialling side's TLS, for
	// gRPC (creds) and the call lanes alike; nil: plaintext.
	srvTLS, cliTLS *tls.Config
	stats          counters
	watch          watchers
	heard          *heard
	bufs           *bufPool // gRPC's buffers, both ways (bufpool.go)
	calls          *callTimes

	secret      [sha256.Size]byte
	maxMsg      int
	maxSnapshot int64
	refusals    refusals

	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	// answersRead is OnAnswersRead's fn; nil for none.
	answersRead atomic.Pointer[func()]

	mu    sync.Mutex
	addrs map[string]string
	peers map[string]*peerConn
}

var _ Network = (*GRPCNetwork)(nil)

// NewGRPC starts a gRPC Network serving on cfg's listener.
func NewGRPC(cfg Config) (*GRPCNetwork, error) {
	if cfg.Node == "" {
		return nil, errors.New("cluster transport: a node name is required")
	}
	if cfg.Secret == "" {
		return nil, errors.New("cluster transport: a join secret is required")
	}
	if len(cfg.Secret) > maxHelloField {
		return nil, fmt.Errorf("cluster transport: a join secret of %d bytes (at most %d)", len(cfg.Secret), maxHelloField)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = 10 * time.Second
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = time.Second
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = 2 * time.Second
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("cluster transport: listen: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &GRPCNetwork{
		log: cfg.Logger.With("component", "cluster-transport"), cfg: cfg, ln: ln,
		secret: sha256.Sum256([]byte(cfg.Secret)), maxMsg: cfg.MaxMessageBytes, maxSnapshot: 1 << 40,
		ctx: ctx, cancel: cancel, addrs: map[string]string{}, peers: map[string]*peerConn{}, heard: newHeard(),
		bufs: &bufPool{}, calls: newCallTimes(),
	}
	n.core = newCore(cfg.Node, n, cfg.RPCTimeout)
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(n.maxMsg + frameBytes),
		grpc.MaxSendMsgSize(n.maxMsg + frameBytes),
		grpc.UnaryInterceptor(n.authUnary),
		grpc.StreamInterceptor(n.authStream),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepaliveInterval, Timeout: cfg.KeepaliveInterval}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepaliveInterval / 2, PermitWithoutStream: true}),
		grpc.InitialWindowSize(windowBytes),
		grpc.InitialConnWindowSize(windowBytes),
		experimental.BufferPool(n.bufs),
	}
	if cfg.TLS != nil {
		n.srvTLS = cfg.TLS.Clone()
		n.srvTLS.ClientAuth = tls.RequireAndVerifyClientCert
		if n.srvTLS.ClientCAs == nil {
			n.srvTLS.ClientCAs = n.srvTLS.RootCAs
		}
		n.cliTLS = cfg.TLS.Clone()
		if n.cliTLS.RootCAs == nil {
			n.cliTLS.RootCAs = n.cliTLS.ClientCAs
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(n.srvTLS)))
		n.creds = credentials.NewTLS(n.cliTLS)
	}
	n.srv = grpc.NewServer(opts...)
	pb.RegisterClusterServer(n.srv, &service{n: n})
	go func() { _ = n.srv.Serve(newMuxListener(ctx, ln, cfg.KeepaliveInterval, n.serveLane)) }()
	return n, nil
}

// Addr is the address the Network listens on.
func (n *GRPCNetwork) Addr() net.Addr { return n.ln.Addr() }

// Stats counts the frames and messages sent and received.
func (n *GRPCNetwork) Stats() Stats { return n.stats.load() }

func (n *GRPCNetwork) Node() string                    { return n.core.node }
func (n *GRPCNetwork) Group(id string) GroupTransport  { return n.core.group(id) }
func (n *GRPCNetwork) Handle(method string, h Handler) { n.core.handle(method, callHandler{h: h}) }

// HandleOrdered implements Network: the calls of method a peer sends on
// its data stream start in the order they came.
func (n *GRPCNetwork) HandleOrdered(method string, s Starter) {
	n.core.handle(method, callHandler{s: s})
}

// OnAnswersRead has fn run on the reader of each of this node's links to
// a peer whenever it has handed over every answer it has read (their
// Send done callbacks have returned) and is about to wait for more, and
// once more when the link ends: work that those callbacks leave to be
// done together (the confirms of several publish answers, written to
// their client once) is done there. fn runs on many readers at once and
// must not block. It replaces an earlier fn; stop removes fn (and only
// fn: not one that replaced it).
func (n *GRPCNetwork) OnAnswersRead(fn func()) (stop func()) {
	p := &fn
	n.answersRead.Store(p)
	return func() { n.answersRead.CompareAndSwap(p, nil) }
}

// answersHandled runs OnAnswersRead's fn, if any.
func (n *GRPCNetwork) answersHandled() {
	if fn := n.answersRead.Load(); fn != nil {
		(*fn)()
	}
}

// HandleInline implements Network: the calls of method a peer sends on
// its data stream run on the stream's reader, in the order they came.
func (n *GRPCNetwork) HandleInline(method string, h Handler) {
	n.core.handle(method, callHandler{inline: h})
}

// Watch reports a peer up when its connection is ready, and down when it
// breaks or cannot be made (refused, reset, keepalive unanswered) or the
// peer stops answering the node heartbeat: for every peer this node has an
// address for (SetAddress).
func (n *GRPCNetwork) Watch(fn func(node string, up bool)) func() { return n.watch.add(fn) }

// SetAddress tells the Network where node listens ("host:port"). A changed
// address replaces the connection to node; an empty one closes it (a node
// that left: calls to it fail with Unavailable, Watch says no more of it).
func (n *GRPCNetwork) SetAddress(node, addr string) error {
	if node == n.core.node {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return unavailable(n.core.node, errClosed)
	}
	if n.addrs[node] == addr {
		return nil
	}
	if old := n.peers[node]; old != nil {
		delete(n.peers, node)
		go old.close()
	}
	if addr == "" {
		delete(n.addrs, node)
		return nil
	}
	n.addrs[node] = addr
	p, err := n.dial(node, addr)
	if err != nil {
		return err
	}
	n.peers[node] = p
	return nil
}

// Hello asks the node listening on addr for its name (membership learns
// the name behind a seed address). It presents the join secret like every
// call.
func (n *GRPCNetwork) Hello(ctx context.Context, addr string) (string, error) {
	conn, err := grpc.NewClient("passthrough:///"+addr, n.dialOptions(hostOf(addr))...)
	if err != nil {
		return "", status.Errorf(codes.InvalidArgument, "address %q: %v", addr, err)
	}
	defer conn.Close()
	resp, err := pb.NewClusterClient(conn).Hello(n.outgoing(ctx), &pb.HelloRequest{})
	if err != nil {
		return "", err
	}
	return resp.GetNode(), nil
}

// Close stops serving, closes every connection and group transport; calls
// in flight fail with Unavailable.
func (n *GRPCNetwork) Close() error {
	n.mu.Lock()
	if n.ctx.Err() != nil {
		n.mu.Unlock()
		return nil
	}
	n.cancel()
	peers := n.peers
	n.peers = map[string]*peerConn{}
	n.mu.Unlock()
	n.core.close()
	n.srv.Stop()
	for _, p := range peers {
		p.close()
	}
	return nil
}

// peer returns the connection to node, or Unavailable if its address is
// unknown.
func (n *GRPCNetwork) peer(node string) (*peerConn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return nil, unavailable(n.core.node, errClosed)
	}
	if p := n.peers[node]; p != nil {
		return p, nil
	}
	return nil, status.Errorf(codes.Unavailable, "node %q: no address known", node)
}

func (n *GRPCNetwork) Call(ctx context.Context, node, method string, req []byte) ([]byte, error) {
	if node == n.core.node {
		return n.core.serveCall(ctx, node, method, req)
	}
	l, err := n.callLink(ctx, node, req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := l.roundTrip(ctx, callMessage(method, req))
	n.calls.since(method, start)
	if err != nil {
		return nil, err
	}
	return callAnswer(node, resp)
}

// Send implements Network: the request is queued on the data stream to
// node, whose messages go out (and are read there) in the order queued;
// done runs on the stream's reader.
func (n *GRPCNetwork) Send(ctx context.Context, node, method string, req []byte, done func([]byte, error)) error {
	if node == n.core.node {
		sendSelf(ctx, n.core, method, req, done)
		return nil
	}
	start := time.Now()
	answer := func(resp *pb.Message, err error) {
		n.calls.since(method, start)
		if err != nil {
			done(nil, err)
			return
		}
		done(callAnswer(node, resp))
	}
	if immediate(ctx) {
		// Never waits, not even for the stream to open (peer.go).
		if len(req) > n.maxMsg {
			return status.Errorf(codes.ResourceExhausted, "call of %d bytes (limit %d)", len(req), n.maxMsg)
		}
		p, err := n.peer(node)
		if err != nil {
			return err
		}
		return p.sendImmediate(ctx, callMessage(method, req), answer)
	}
	l, err := n.callLink(ctx, node, req)
	if err != nil {
		return err
	}
	return l.sendAsync(ctx, callMessage(method, req), answer)
}

// sendSelf is a Send to this node: the start runs in place (in the order
// of the caller's Sends), a plain handler and done on a goroutine (never
// the caller's, which may hold what done takes).
// Its context's end (or Within's deadline) fails it at once, as over a
// link.
func sendSelf(ctx context.Context, c *core, method string, req []byte, done func([]byte, error)) {
	ctx, cancel := withDeadline(ctx)
	var ended atomic.Bool
	finish := func(resp []byte, err error) {
		if ended.CompareAndSwap(false, true) {
			cancel()
			go done(resp, err)
		}
	}
	stop := context.AfterFunc(ctx, func() { finish(nil, ctxStatus(ctx, c.node)) })
	run, err := c.startCall(ctx, c.node, method, req, func(resp []byte, err error) {
		stop()
		finish(resp, err)
	})
	switch {
	case err != nil:
		stop()
		finish(nil, err)
	case run != nil:
		go run()
	}
}

// callLink is the call lane to node (or its data stream while it has
// none), for a call of req.
func (n *GRPCNetwork) callLink(ctx context.Context, node string, req []byte) (*clientLink, error) {
	if len(req) > n.maxMsg {
		return nil, status.Errorf(codes.ResourceExhausted, "call of %d bytes (limit %d)", len(req), n.maxMsg)
	}
	p, err := n.peer(node)
	if err != nil {
		return nil, err
	}
	return p.callLink(ctx)
}

func callMessage(method string, req []byte) *pb.Message {
	return &pb.Message{Body: &pb.Message_Call{Call: &pb.CallRequest{Method: method, Payload: req}}}
}

func callAnswer(node string, resp *pb.Message) ([]byte, error) {
	r, ok := resp.GetBody().(*pb.Message_CallResp)
	if !ok {
		return nil, status.Errorf(codes.Internal, "node %q answered a call with %T", node, resp.GetBody())
	}
	return r.CallResp.GetPayload(), nil
}

// startRaft sends an append on the data stream without waiting for its
// answer (the pipeline): the stream and the receiver keep a group's appends
// in order.
func (n *GRPCNetwork) startRaft(ctx context.Context, node, group string, cmd any) (func() (any, error), error) {
	p, err := n.peer(node)
	if err != nil {
		return nil, err
	}
	l, err := p.link(ctx, data)
	if err != nil {
		return nil, err
	}
	m, err := n.raftMessage(group, cmd)
	if err != nil {
		return nil, err
	}
	id, ch, err := l.send(ctx, m)
	if err != nil {
		return nil, err
	}
	return func() (any, error) {
		resp, err := l.wait(ctx, id, ch)
		if err != nil {
			return nil, err
		}
		return n.raftAnswer(node, cmd, resp)
	}, nil
}

func (n *GRPCNetwork) raftMessage(group string, cmd any) (*pb.Message, error) {
	m := &pb.Message{Group: group}
	if err := setRaftBody(m, cmd); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if size := m.SizeVT(); size > n.maxMsg {
		return nil, status.Errorf(codes.ResourceExhausted, "%T of %d bytes (limit %d)", cmd, size, n.maxMsg)
	}
	return m, nil
}

func (n *GRPCNetwork) raftAnswer(node string, cmd any, resp *pb.Message) (any, error) {
	v, ok, err := raftBody(resp)
	if !ok || err != nil {
		return nil, status.Errorf(codes.Internal, "node %q answered %T badly: %v", node, cmd, err)
	}
	return v, nil
}

// sendRaft sends one Raft RPC: heartbeats, votes and timeout-now on the
// control stream, appends on the data stream, snapshots on their own.
func (n *GRPCNetwork) sendRaft(ctx context.Context, node, group string, cmd any, r io.Reader) (any, error) {
	p, err := n.peer(node)
	if err != nil {
		return nil, err
	}
	kind := control
	switch cmd.(type) {
	case *raft.AppendEntriesRequest:
		if !isHeartbeat(cmd) {
			kind = data
		}
	case *raft.InstallSnapshotRequest:
		kind = snapshot
	}
	l, err := p.link(ctx, kind)
	if err != nil {
		return nil, err
	}
	m, err := n.raftMessage(group, cmd)
	if err != nil {
		return nil, err
	}
	var resp *pb.Message
	if kind == snapshot {
		resp, err = l.sendSnapshot(ctx, m, cmd.(*raft.InstallSnapshotRequest).Size, r)
	} else {
		resp, err = l.roundTrip(ctx, m)
	}
	if err != nil {
		return nil, err
	}
	return n.raftAnswer(node, cmd, resp)
}

// outgoing adds the join secret and this node's name to ctx.
func (n *GRPCNetwork) outgoing(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, mdSecret, n.cfg.Secret, mdNode, n.core.node)
}

const (
	mdSecret = "warren-join-secret"
	mdNode   = "warren-node"
)

// auth checks the join secret a peer presented (in constant time); a peer
// without it is refused with Unauthenticated and logged with its address.
func (n *GRPCNetwork) auth(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var got, from string
	if v := md.Get(mdSecret); len(v) == 1 {
		got = v[0]
	}
	if v := md.Get(mdNode); len(v) == 1 {
		from = v[0]
	}
	sum := sha256.Sum256([]byte(got))
	if subtle.ConstantTimeCompare(sum[:], n.secret[:]) != 1 {
		addr := "unknown"
		if p, ok := peer.FromContext(ctx); ok {
			addr = p.Addr.String()
		}
		if n.refusals.first(addr) {
			n.log.Warn("cluster peer refused: wrong or missing join secret", "addr", addr, "node", from)
		}
		return "", status.Error(codes.Unauthenticated, "join secret does not match")
	}
	if from == "" || len(from) > 255 {
		return "", status.Error(codes.InvalidArgument, "no node name")
	}
	return from, nil
}

func (n *GRPCNetwork) authUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if _, err := n.auth(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (n *GRPCNetwork) authStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if _, err := n.auth(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

// refusals limits the log of refused peers to one line per address a minute.
type refusals struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (r *refusals) first(addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.last == nil || len(r.last) > 1024 {
		r.last = map[string]time.Time{}
	}
	if t, ok := r.last[addr]; ok && now.Sub(t) < time.Minute {
		return false
	}
	r.last[addr] = now
	return true
}

// service is the Cluster gRPC service of a Network.
type service struct {
	pb.UnimplementedClusterServer
	n *GRPCNetwork
}

func (s *service) Hello(context.Context, *pb.HelloRequest) (*pb.HelloResponse, error) {
	return &pb.HelloResponse{Node: s.n.core.node}, nil
}

func (s *service) Control(st grpc.BidiStreamingServer[pb.Frame, pb.Frame]) error {
	return s.serve(st, control)
}

func (s *service) Data(st grpc.BidiStreamingServer[pb.Frame, pb.Frame]) error {
	return s.serve(st, data)
}

func (s *service) Snapshot(st grpc.BidiStreamingServer[pb.Frame, pb.Frame]) error {
	return s.serve(st, snapshot)
}

func (s *service) serve(st grpc.BidiStreamingServer[pb.Frame, pb.Frame], kind streamKind) error {
	from, err := s.n.auth(st.Context())
	if err != nil {
		return err
	}
	l := &serverLink{
		link: newLink(st.Context(), st, &s.n.stats, queueBytes),
		n:    s.n, kind: kind, from: from,
		inflight: map[uint64]context.CancelFunc{}, queues: map[string][]func(){}, snaps: map[uint64]*snapIn{},
	}
	return l.serve()
}
