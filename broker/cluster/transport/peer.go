package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

// peerConn is this node's connection to one peer: a gRPC ClientConn dialled
// by node name (the resolver gives the address SetAddress recorded; gRPC
// redials with backoff when the peer goes away) and up to three streams on
// it, opened on first use and again after one breaks; the call lane to the
// peer (lane.go), which lives no longer than that connection; and its
// health for Watch (connection state and the node heartbeat).
type peerConn struct {
	n      *GRPCNetwork
	node   string
	addr   string
	conn   *grpc.ClientConn
	client pb.ClusterClient

	ctx    context.Context
	cancel context.CancelFunc

	// mu serializes the opening of streams (held while gRPC opens one);
	// links are read without it.
	mu    sync.Mutex
	links [numKinds]atomic.Pointer[clientLink]

	// The call lane (lane.go). lmu guards the fields below it and is
	// held only briefly: a lane is dialled on a goroutine of its own
	// (dialing), which callers wait for as long as their context lets
	// them. laneless: for a peer that does not know lanes (an older
	// node), the data stream its calls go on; calls stay on it while it
	// stands (all of them, so Sends keep their order) and a lane is tried
	// again once it ended (the peer may come back upgraded). gen counts
	// the gRPC connection's breaks, so a dial that began before one does
	// not mark the peer as lane-less after it. refused, until
	// refusedUntil: the peer refused the last lane (a wrong secret, a TLS
	// setting not its own): calls fail with it at once meanwhile.
	laneless     atomic.Pointer[clientLink]
	lmu          sync.Mutex
	dialing      *laneDial
	gen          uint64
	refused      error
	refusedUntil time.Time

	// The Immediate Sends waiting for the call lane (or data stream) to
	// open, and whether a goroutine is opening it to send them
	// (sendImmediate).
	// smu is taken before a stream's own locks (a Send made under it), never with mu.
	smu     sync.Mutex
	waiting []*pendingSend
	opening bool

	hmu                          sync.Mutex // the peer's health, for Watch
	ready, healthy, reported, up bool

	heard *lastHeard // when a frame from the peer last came (liveness.go)
}

// dial makes the connection to node at addr (under n.mu).
func (n *GRPCNetwork) dial(node, addr string) (*peerConn, error) {
	opts := append(n.dialOptions(hostOf(addr)), grpc.WithResolvers(&nodeResolver{node: node, addr: addr}))
	conn, err := grpc.NewClient(resolverScheme+":///"+node, opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster transport: dial %s at %s: %w", node, addr, err)
	}
	ctx, cancel := context.WithCancel(n.ctx)
	p := &peerConn{n: n, node: node, addr: addr, conn: conn, client: pb.NewClusterClient(conn), ctx: n.outgoing(ctx), cancel: cancel,
		heard: n.heard.of(node, true)}
	conn.Connect()
	go p.watchState()
	go p.ping()
	return p, nil
}

func (n *GRPCNetwork) dialOptions(authority string) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if n.creds != nil {
		creds = n.creds
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithAuthority(authority),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(n.maxMsg+frameBytes), grpc.MaxCallSendMsgSize(n.maxMsg+frameBytes)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: n.cfg.KeepaliveInterval, Timeout: n.cfg.KeepaliveInterval, PermitWithoutStream: true}),
		grpc.WithIdleTimeout(0), // never idle: the failure signal needs a live connection
		grpc.WithInitialWindowSize(windowBytes),
		grpc.WithInitialConnWindowSize(windowBytes),
		experimental.WithBufferPool(n.bufs),
	}
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// link returns the open stream of kind, opening one if there is none.
func (p *peerConn) link(ctx context.Context, kind streamKind) (*clientLink, error) {
	if l := p.openLink(kind); l != nil {
		return l, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.openLink(kind); l != nil { // opened meanwhile
		return l, nil
	}
	if p.ctx.Err() != nil {
		return nil, unavailable(p.node, errClosed)
	}
	sctx, cancel := context.WithCancel(p.ctx)
	var (
		s   frameStream
		err error
	)
	switch kind {
	case control:
		s, err = p.client.Control(sctx)
	case data:
		s, err = p.client.Data(sctx)
	default:
		s, err = p.client.Snapshot(sctx)
	}
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctxStatus(ctx, p.node)
		}
		return nil, unavailable(p.node, err)
	}
	l := newClientLink(sctx, p.node, s, &p.n.stats, queueBytes, p.n.heard, p.heard, p.n.answersHandled)
	go func() {
		<-l.ctx.Done()
		cancel()
	}()
	p.links[kind].Store(l)
	return l, nil
}

// laneDial is a call lane being dialled: done closes when l (or err) is
// set.
type laneDial struct {
	done chan struct{}
	l    *clientLink
	err  error
}

// refusedFor is how long a refused lane's error answers calls at once.
const refusedFor = time.Second

// callLink returns the link node-level calls go on: the call lane, dialled
// if there is none, or the data stream of a peer without lanes (laneless).
// Calls switch from that data stream to a lane only once it ended (its
// calls failed or were answered), so Sends keep their order. While the
// connection to the peer is failing (gRPC's TransientFailure, which the
// data stream failed fast on too) no lane is dialled: the call fails with
// Unavailable at once.
func (p *peerConn) callLink(ctx context.Context) (*clientLink, error) {
	if l := p.openCallLink(); l != nil {
		return l, nil
	}
	p.lmu.Lock()
	if l := p.openCallLink(); l != nil { // opened meanwhile
		p.lmu.Unlock()
		return l, nil
	}
	switch {
	case p.ctx.Err() != nil:
		p.lmu.Unlock()
		return nil, unavailable(p.node, errClosed)
	case time.Now().Before(p.refusedUntil):
		err := p.refused
		p.lmu.Unlock()
		return nil, err
	case p.conn.GetState() == connectivity.TransientFailure:
		p.lmu.Unlock()
		return nil, unavailable(p.node, errors.New("the connection is failing"))
	}
	d := p.dialing
	if d == nil {
		d = &laneDial{done: make(chan struct{})}
		p.dialing = d
		go p.dialLane(d, p.gen)
	}
	p.lmu.Unlock()
	wctx, cancel := withDeadline(ctx) // a Send Within waits no longer either
	defer cancel()
	select {
	case <-d.done:
	case <-wctx.Done():
		return nil, ctxStatus(wctx, p.node)
	}
	return d.l, d.err
}

// dialLane dials the call lane for the callers waiting on d; gen is the
// connection's count of breaks when the dial began. A peer without lanes
// gets its data stream (opened here) as the link of its calls.
func (p *peerConn) dialLane(d *laneDial, gen uint64) {
	s, err := p.n.dialLane(p.ctx, p.node, p.addr)
	var ds *clientLink
	if errors.Is(err, errNoLane) {
		ds, err = p.link(p.ctx, data)
	}
	p.lmu.Lock()
	defer p.lmu.Unlock()
	defer close(d.done)
	p.dialing = nil
	switch {
	case err == nil && ds != nil:
		if gen != p.gen {
			// Learnt over a connection that broke since: ask again.
			d.err = unavailable(p.node, errLinkClosed)
			return
		}
		p.laneless.Store(ds)
		d.l = ds
		p.n.log.Info("cluster peer has no call lanes (an older node?): its calls go on the data stream", "node", p.node)
	case err == nil:
		sctx, scancel := context.WithCancel(p.ctx)
		l := newClientLink(sctx, p.node, s, &p.n.stats, queueBytes, p.n.heard, p.heard, p.n.answersHandled)
		context.AfterFunc(l.ctx, func() {
			scancel()
			_ = s.c.Close()
		})
		p.links[calls].Store(l)
		d.l = l
	case errors.As(err, new(refusedError)):
		// Unauthenticated for a wrong secret, Unavailable for a TLS
		// setting not the peer's, ...
		d.err = err
		p.refused, p.refusedUntil = err, time.Now().Add(refusedFor)
	case status.Code(err) != codes.Unknown:
		d.err = err
	default:
		d.err = unavailable(p.node, err)
	}
}

// openCallLink is the open link calls go on, without waiting: nil when
// there is none.
func (p *peerConn) openCallLink() *clientLink {
	if l := p.laneless.Load(); l != nil && l.ctx.Err() == nil {
		return l
	}
	return p.openLink(calls)
}

// connBroke ends what lives no longer than the gRPC connection: the call
// lane, reset (its calls in flight fail with Unavailable; requests it had
// not sent are dropped), and what was learnt of the peer's lanes. The data
// stream of a peer without lanes ends with the connection by itself.
func (p *peerConn) connBroke() {
	p.lmu.Lock()
	p.gen++
	p.refusedUntil = time.Time{}
	l := p.links[calls].Load()
	p.lmu.Unlock()
	if l != nil && l.ctx.Err() == nil {
		if s, ok := l.s.(*connStream); ok {
			s.abort()
		}
		l.cancel(errLinkClosed)
	}
}

// pendingSend is an Immediate Send waiting for the call lane to open.
// Whoever takes it out of peerConn.waiting calls its done: the goroutine
// that sends the waiting ones, or its context's end (stop unregisters that).
type pendingSend struct {
	ctx  context.Context
	m    *pb.Message
	done func(*pb.Message, error)
	stop func() bool
}

// sendImmediate queues request m on the call lane (callLink) without
// waiting for anything: opening the lane waits while the connection is
// being made (up to its handshake time), so when none is open, or
// Immediate Sends already wait for one, m waits with them, and a goroutine
// opens the lane and sends them in the order they came (or fails their
// done with its error). A caller's Immediate Sends so keep their order.
// One whose context ends while it waits leaves the queue and its done is
// told so then, not once the opening ends (which may take
// laneHandshakeTime).
func (p *peerConn) sendImmediate(ctx context.Context, m *pb.Message, done func(*pb.Message, error)) error {
	p.smu.Lock()
	if !p.opening {
		if l := p.openCallLink(); l != nil {
			p.smu.Unlock()
			return l.sendAsync(ctx, m, done)
		}
		p.opening = true
		go p.openAndSend()
	}
	ps := &pendingSend{ctx: ctx, m: m, done: done}
	// A Send waits for the lane no longer than its context or Within's
	// deadline (a timer only for a Send that waits): the opening may take
	// up to laneHandshakeTime.
	wctx, cancel := withDeadline(ctx)
	stop := context.AfterFunc(wctx, func() {
		p.smu.Lock()
		i := slices.Index(p.waiting, ps)
		if i >= 0 {
			p.waiting = slices.Delete(p.waiting, i, i+1)
		}
		p.smu.Unlock()
		if i >= 0 {
			done(nil, ctxStatus(wctx, p.node))
		}
	})
	ps.stop = func() bool {
		stopped := stop()
		cancel()
		return stopped
	}
	p.waiting = append(p.waiting, ps)
	p.smu.Unlock()
	return nil
}

// openLink is the open stream of kind, without waiting: nil when there is
// none (or it ended).
func (p *peerConn) openLink(kind streamKind) *clientLink {
	if l := p.links[kind].Load(); l != nil && l.ctx.Err() == nil {
		return l
	}
	return nil
}

// openAndSend opens the call lane and sends the Immediate Sends that wait
// for it, until none is left.
func (p *peerConn) openAndSend() {
	l, err := p.callLink(p.ctx)
	for {
		p.smu.Lock()
		w := p.waiting
		p.waiting = nil
		if len(w) == 0 {
			p.opening = false
			p.smu.Unlock()
			return
		}
		p.smu.Unlock()
		for _, s := range w {
			s.stop()
			if err != nil {
				s.done(nil, err)
				continue
			}
			if serr := l.sendAsync(s.ctx, s.m, s.done); serr != nil {
				s.done(nil, serr)
			}
		}
	}
}

// watchState follows the connection's state: ready or not. Any change
// away from Ready is a break for what lives with the connection
// (connBroke), even one seen only as Connecting (gRPC may leave Idle
// before this goroutine looks).
func (p *peerConn) watchState() {
	wasReady := false
	for {
		s := p.conn.GetState()
		if s == connectivity.Ready {
			wasReady = true
		} else if wasReady {
			wasReady = false
			p.connBroke()
		}
		switch s {
		case connectivity.Ready:
			p.setReady(true)
		case connectivity.TransientFailure, connectivity.Shutdown:
			p.setReady(false)
		case connectivity.Idle:
			// A broken connection idles: reconnect at once.
			p.conn.Connect()
			p.hmu.Lock()
			reported := p.reported
			p.hmu.Unlock()
			if reported {
				p.setReady(false)
			}
		}
		if s == connectivity.Shutdown || !p.conn.WaitForStateChange(p.ctx, s) {
			return
		}
	}
}

// ping sends the node heartbeat while the connection is ready and the peer
// has been silent for PingInterval (liveness.go: any frame from it counts);
// a peer that does not answer is down until it is heard from again. Of two
// nodes with nothing else to say, the one whose name sorts first pings at
// PingInterval, the other only after half as long again, so it hears the
// first one's pings and sends none. While the peer is healthy its frames
// push the timer back (pingTimer), so the goroutine wakes only after a
// silence; while it is down, it wakes every interval to see whether the
// peer was heard from.
func (p *peerConn) ping() {
	cfg := p.n.cfg
	every := cfg.PingInterval
	if p.n.core.node > p.node {
		every += every / 2
	}
	t := time.NewTimer(every)
	defer t.Stop()
	pt := &pingTimer{t: t, every: every}
	listen := func(healthy bool) {
		if healthy {
			p.heard.pinger.Store(pt)
		} else {
			p.heard.pinger.CompareAndSwap(pt, nil)
		}
	}
	defer listen(false)
	listen(true)
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.n.stats.pingWakes.Add(1)
		if p.conn.GetState() != connectivity.Ready {
			t.Reset(every)
			continue
		}
		if quiet := p.n.heard.quiet(p.heard); quiet < every {
			p.setHealthy(true)
			listen(true)
			t.Reset(every - quiet)
			continue
		}
		// Answered within PingTimeout of when the peer was last heard
		// from, or within PingInterval when the silence is older.
		quiet := p.n.heard.quiet(p.heard)
		ctx, cancel := context.WithTimeout(p.ctx, max(cfg.PingTimeout-quiet, cfg.PingInterval))
		l, err := p.link(ctx, control)
		if err == nil {
			p.n.stats.pingsSent.Add(1)
			_, err = l.roundTrip(ctx, &pb.Message{Body: &pb.Message_Ping{Ping: &pb.Ping{}}})
		}
		cancel()
		healthy := err == nil || p.n.heard.quiet(p.heard) < every
		p.setHealthy(healthy)
		listen(healthy)
		t.Reset(every)
	}
}

func (p *peerConn) setReady(ready bool) {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	if ready && !p.ready {
		p.healthy = true // a fresh connection starts healthy
	}
	p.ready = ready
	p.reportLocked()
}

func (p *peerConn) setHealthy(healthy bool) {
	p.hmu.Lock()
	defer p.hmu.Unlock()
	if p.ready {
		p.healthy = healthy
		p.reportLocked()
	}
}

// reportLocked tells the watchers when the peer's state changed: up while
// its connection is ready and it answers the node heartbeat.
func (p *peerConn) reportLocked() {
	up := p.ready && p.healthy
	if p.reported && up == p.up || p.ctx.Err() != nil {
		return // no news, or a closed connection (replaced: its successor reports)
	}
	p.reported, p.up = true, up
	if up {
		p.n.log.Info("cluster peer up", "node", p.node)
	} else {
		p.n.log.Warn("cluster peer down", "node", p.node)
	}
	p.n.watch.emit(p.node, up)
}

func (p *peerConn) close() {
	p.cancel()
	_ = p.conn.Close()
}

// resolverScheme is how a peer's ClientConn names its target: by node name.
const resolverScheme = "warren-node"

// nodeResolver resolves a node name to the address SetAddress recorded.
type nodeResolver struct {
	node, addr string
}

func (r *nodeResolver) Build(_ resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	if err := cc.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: r.addr}}}); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *nodeResolver) Scheme() string                        { return resolverScheme }
func (r *nodeResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (r *nodeResolver) Close()                                {}
