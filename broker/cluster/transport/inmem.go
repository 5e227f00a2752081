package transport

import (
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// InmemHub connects in-memory Networks in one process: the twin of the gRPC
// Network for fast tests, with the same names, status codes and
// concurrency contract, and fault controls (Partition, Isolate, Heal; a
// node goes down by closing its Network and comes back by asking the hub
// for it again).
type InmemHub struct {
	rpcTimeout time.Duration

	mu       sync.Mutex
	nets     map[string]*inmemNetwork
	cut      map[[2]string]bool // unordered pairs, smaller name first
	isolated map[string]bool
	view     map[[2]string]bool // [watcher, peer] -> last reported up
	flights  map[*flight]struct{}
	delay    func(from, to, method string) time.Duration
}

// flight is a Raft RPC or call under way from one node to another; it is
// cancelled (cause errUnreachable) when the link between them is cut.
type flight struct {
	from, to string
	cancel   context.CancelCauseFunc
}

// NewInmemHub returns a hub without Networks.
func NewInmemHub() *InmemHub {
	return &InmemHub{
		rpcTimeout: DefaultRPCTimeout,
		nets:       map[string]*inmemNetwork{},
		cut:        map[[2]string]bool{},
		isolated:   map[string]bool{},
		view:       map[[2]string]bool{},
		flights:    map[*flight]struct{}{},
	}
}

// Network returns node's Network on the hub, creating it if node has none
// open (again after a Close: the node restarted).
func (h *InmemHub) Network(node string) Network {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.nets[node]; n != nil {
		return n
	}
	n := &inmemNetwork{hub: h}
	n.core = newCore(node, n, h.rpcTimeout)
	h.nets[node] = n
	h.refreshLocked()
	return n
}

// Partition cuts the link between nodes a and b both ways: RPCs and calls
// between them, and those in flight, fail with codes.Unavailable.
func (h *InmemHub) Partition(a, b string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cut[pair(a, b)] = true
	h.refreshLocked()
}

// Isolate cuts node off from every other node.
func (h *InmemHub) Isolate(node string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.isolated[node] = true
	h.refreshLocked()
}

// Heal undoes every Partition and Isolate.
func (h *InmemHub) Heal() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.cut)
	clear(h.isolated)
	h.refreshLocked()
}

// SetDelay makes every call from node from to node to of method wait
// fn(from, to, method) before it reaches to (nil: none). A Sent request
// holds up the requests Sent after it on its link, as on a stream; Calls
// may overtake each other, as concurrent Calls over gRPC may (each is
// queued on the stream when its goroutine gets there).
func (h *InmemHub) SetDelay(fn func(from, to, method string) time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.delay = fn
}

// delayOf is the delay SetDelay set for one call.
func (h *InmemHub) delayOf(from, to, method string) time.Duration {
	h.mu.Lock()
	fn := h.delay
	h.mu.Unlock()
	if fn == nil {
		return 0
	}
	return fn(from, to, method)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func pair(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

func (h *InmemHub) reachableLocked(from, to string) bool {
	if h.nets[from] == nil || h.nets[to] == nil {
		return false
	}
	return from == to || !h.cut[pair(from, to)] && !h.isolated[from] && !h.isolated[to]
}

// refreshLocked cancels the flights whose link is cut and tells each
// Network's watchers of the peers whose reachability changed.
func (h *InmemHub) refreshLocked() {
	for f := range h.flights {
		if !h.reachableLocked(f.from, f.to) {
			f.cancel(errUnreachable)
			delete(h.flights, f)
		}
	}
	for k, up := range h.view {
		if h.nets[k[0]] == nil {
			delete(h.view, k)
		} else if now := h.reachableLocked(k[0], k[1]); now != up {
			h.view[k] = now
			h.nets[k[0]].watch.emit(k[1], now)
		}
	}
	for a, n := range h.nets {
		for b := range h.nets {
			k := [2]string{a, b}
			if _, seen := h.view[k]; !seen && a != b && h.reachableLocked(a, b) {
				h.view[k] = true
				n.watch.emit(b, true)
			}
		}
	}
}

// link starts a flight from node from to node to: the target's Network and
// a context that ends with ctx or when the link is cut; done ends the flight.
func (h *InmemHub) link(ctx context.Context, from, to string) (*inmemNetwork, context.Context, func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.reachableLocked(from, to) {
		return nil, nil, nil, unavailable(to, errUnreachable)
	}
	fctx, cancel := context.WithCancelCause(ctx)
	f := &flight{from: from, to: to, cancel: cancel}
	h.flights[f] = struct{}{}
	done := func() {
		h.mu.Lock()
		delete(h.flights, f)
		h.mu.Unlock()
		cancel(nil)
	}
	return h.nets[to], fctx, done, nil
}

func (h *InmemHub) closed(n *inmemNetwork) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nets[n.core.node] == n {
		delete(h.nets, n.core.node)
	}
	h.refreshLocked()
}

// inmemNetwork is one node's Network on an InmemHub.
type inmemNetwork struct {
	hub   *InmemHub
	core  *core
	watch watchers
	once  sync.Once

	mu    sync.Mutex
	pipes map[string][]func() // by target: Sent requests waiting for the one going in
}

var _ Network = (*inmemNetwork)(nil)

func (n *inmemNetwork) Node() string                       { return n.core.node }
func (n *inmemNetwork) Group(id string) GroupTransport     { return n.core.group(id) }
func (n *inmemNetwork) Handle(method string, h Handler)    { n.core.handle(method, callHandler{h: h}) }
func (n *inmemNetwork) Watch(fn func(string, bool)) func() { return n.watch.add(fn) }

func (n *inmemNetwork) HandleOrdered(method string, s Starter) {
	n.core.handle(method, callHandler{s: s})
}

// HandleInline implements Network: a Sent call's handler runs where the
// link's queue starts it, in the order Sent (its answer goes back on a
// goroutine, as any answer does over the twin).
func (n *inmemNetwork) HandleInline(method string, h Handler) {
	n.core.handle(method, callHandler{inline: h})
}

func (n *inmemNetwork) Close() error {
	n.once.Do(func() {
		n.core.close()
		n.hub.closed(n)
	})
	return nil
}

func (n *inmemNetwork) Call(ctx context.Context, node, method string, req []byte) ([]byte, error) {
	if node == n.core.node {
		return n.core.serveCall(ctx, node, method, req)
	}
	peer, fctx, done, err := n.hub.link(ctx, n.core.node, node)
	if err != nil {
		return nil, err
	}
	defer done()
	ch := make(chan callResult, 1)
	go func() {
		sleep(fctx, n.hub.delayOf(n.core.node, node, method))
		resp, err := peer.core.serveCall(fctx, n.core.node, method, slices.Clone(req))
		ch <- callResult{slices.Clone(resp), err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && fctx.Err() != nil {
			return nil, ctxStatus(fctx, node) // as Send's done
		}
		return r.resp, r.err
	case <-fctx.Done():
		return nil, ctxStatus(fctx, node)
	}
}

type callResult struct {
	resp []byte
	err  error
}

// Send implements Network: the requests Sent to one node go through one
// queue, started there one after another in the order they were Sent.
func (n *inmemNetwork) Send(ctx context.Context, node, method string, req []byte, done func([]byte, error)) error {
	if node == n.core.node {
		sendSelf(ctx, n.core, method, req, done)
		return nil
	}
	ctx, cancel := withDeadline(ctx) // Within's deadline, watched with the rest
	peer, fctx, endFlight, err := n.hub.link(ctx, n.core.node, node)
	if err != nil {
		cancel()
		return err
	}
	req = slices.Clone(req)
	var once sync.Once
	finish := func(resp []byte, err error) {
		once.Do(func() {
			endFlight()
			cancel()
			done(resp, err)
		})
	}
	stop := context.AfterFunc(fctx, func() { finish(nil, ctxStatus(fctx, node)) })
	n.enqueue(node, func() {
		sleep(fctx, n.hub.delayOf(n.core.node, node, method))
		if fctx.Err() != nil {
			return // the watch of fctx tells done
		}
		// The answer goes back on a goroutine, as over gRPC (where the
		// caller's reader gets it): never on the answering node's.
		run, err := peer.core.startCall(fctx, n.core.node, method, req, func(resp []byte, err error) {
			go func() {
				stop()
				if err != nil && fctx.Err() != nil {
					// The handler saw the call's end (the link cut, the
					// caller gone): the caller is told that, as over
					// gRPC, not the handler's own context error.
					err = ctxStatus(fctx, node)
				}
				finish(slices.Clone(resp), err)
			}()
		})
		if err != nil {
			stop()
			finish(nil, err)
			return
		}
		if run != nil {
			go run()
		}
	})
	return nil
}

// enqueue queues a Sent request's start on the link to node.
func (n *inmemNetwork) enqueue(node string, start func()) {
	n.mu.Lock()
	if n.pipes == nil {
		n.pipes = map[string][]func(){}
	}
	q, running := n.pipes[node]
	n.pipes[node] = append(q, start)
	n.mu.Unlock()
	if !running {
		go n.drain(node)
	}
}

// drain starts the requests queued to node in order until none is left.
func (n *inmemNetwork) drain(node string) {
	for {
		n.mu.Lock()
		q := n.pipes[node]
		if len(q) == 0 {
			delete(n.pipes, node)
			n.mu.Unlock()
			return
		}
		start := q[0]
		q[0] = nil
		n.pipes[node] = q[1:]
		n.mu.Unlock()
		start()
	}
}

func (n *inmemNetwork) sendRaft(ctx context.Context, node, group string, cmd any, data io.Reader) (any, error) {
	peer, fctx, done, err := n.hub.link(ctx, n.core.node, node)
	if err != nil {
		return nil, err
	}
	defer done()
	return peer.core.serveRaft(fctx, group, cloneCmd(cmd), data)
}

// cloneCmd copies what a receiving Raft keeps of a request (the log entries
// of an append), as if it had crossed a wire.
func cloneCmd(cmd any) any {
	req, ok := cmd.(*raft.AppendEntriesRequest)
	if !ok || len(req.Entries) == 0 {
		return cmd
	}
	cp := *req
	cp.Entries = make([]*raft.Log, len(req.Entries))
	for i, l := range req.Entries {
		lc := *l
		cp.Entries[i] = &lc
	}
	return &cp
}
