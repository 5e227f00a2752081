package transport

import (
	"context"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultRPCTimeout bounds one Raft RPC (an InstallSnapshot gets more in
// proportion to its size); Raft retries an RPC that timed out.
const DefaultRPCTimeout = 10 * time.Second

// sender is how a Network's group transports send: one Raft RPC of group to
// node, answered with the response struct or a status error. data is the
// snapshot of an InstallSnapshot, else nil.
type sender interface {
	sendRaft(ctx context.Context, node, group string, cmd any, data io.Reader) (any, error)
}

// core is the part every Network implementation shares: the node's name,
// its open group transports and its call handlers, and the receiving side
// of both (a Raft RPC to its group, a call to its handler).
type core struct {
	node       string
	rpcTimeout time.Duration
	out        sender

	mu       sync.Mutex
	groups   map[string]*group
	handlers map[string]callHandler
	closed   bool
}

func newCore(node string, out sender, rpcTimeout time.Duration) *core {
	if rpcTimeout <= 0 {
		rpcTimeout = DefaultRPCTimeout
	}
	return &core{node: node, out: out, rpcTimeout: rpcTimeout, groups: map[string]*group{}, handlers: map[string]callHandler{}}
}

// group returns the open transport of group id, opening it if needed. After
// close it returns a closed transport whose RPCs fail with Unavailable.
func (c *core) group(id string) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.groups[id]; g != nil {
		return g
	}
	g := newGroup(c, id)
	if c.closed {
		g.shut()
		return g
	}
	c.groups[id] = g
	return g
}

// forget drops g from the open groups (g closed itself).
func (c *core) forget(g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
}

// openGroup is the receiving side's lookup: nil if id is not open here.
func (c *core) openGroup(id string) *group {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.groups[id]
}

// callHandler is a method's handler: a Handler, a Starter whose calls
// start in the order their sender sent them, or an inline Handler whose
// calls run, in that order, where they are read (HandleInline).
type callHandler struct {
	h      Handler
	s      Starter
	inline Handler
}

func (h callHandler) none() bool { return h.h == nil && h.s == nil && h.inline == nil }

func (c *core) handle(method string, h callHandler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.none() {
		delete(c.handlers, method)
		return
	}
	c.handlers[method] = h
}

// handler is method's handler.
func (c *core) handler(method string) (callHandler, error) {
	c.mu.Lock()
	h, closed := c.handlers[method], c.closed
	c.mu.Unlock()
	if closed {
		return h, unavailable(c.node, errClosed)
	}
	if h.none() {
		return h, status.Errorf(codes.Unimplemented, "node %q has no handler for %q", c.node, method)
	}
	return h, nil
}

// serveRaft delivers one Raft RPC that arrived to its group and waits for
// Raft's answer.
func (c *core) serveRaft(ctx context.Context, group string, cmd any, data io.Reader) (any, error) {
	wait, err := c.startRaft(ctx, group, cmd, data)
	if err != nil {
		return nil, err
	}
	return wait()
}

// startRaft hands one Raft RPC that arrived to its group and returns how to
// wait for Raft's answer.
func (c *core) startRaft(ctx context.Context, group string, cmd any, data io.Reader) (func() (any, error), error) {
	g := c.openGroup(group)
	if g == nil {
		return nil, status.Errorf(codes.Unavailable, "node %q has no Raft group %q open", c.node, group)
	}
	return g.start(ctx, cmd, data)
}

// serveCall runs the handler of method for a call from node from; its error
// comes back as a status error.
func (c *core) serveCall(ctx context.Context, from, method string, req []byte) ([]byte, error) {
	answered := make(chan callResult, 1)
	run, err := c.startCall(ctx, from, method, req, func(resp []byte, err error) { answered <- callResult{resp, err} })
	if err != nil {
		return nil, err
	}
	if run != nil {
		run()
	}
	r := <-answered
	return r.resp, r.err
}

// start runs an ordered handler's start, its errors (returned or
// answered) as status errors.
func (h callHandler) start(ctx context.Context, from string, req []byte, answer func([]byte, error)) error {
	return asStatus(h.s(ctx, from, req, func(resp []byte, err error) { answer(resp, asStatus(err)) }))
}

// startCall starts a call from node from and has answer called once with
// its answer (errors as status errors), unless it returns an error itself.
// An inline handler and an ordered handler's start run here (answer may
// be called before startCall returns, or later from any goroutine); a
// plain handler is run, returned, which the caller calls where it may
// block (it calls answer at its end).
func (c *core) startCall(ctx context.Context, from, method string, req []byte, answer func([]byte, error)) (run func(), err error) {
	h, err := c.handler(method)
	if err != nil {
		return nil, err
	}
	switch {
	case h.inline != nil:
		resp, err := h.inline(ctx, from, req)
		answer(resp, asStatus(err))
		return nil, nil
	case h.s != nil:
		return nil, h.start(ctx, from, req, answer)
	default:
		return func() {
			resp, err := h.h(ctx, from, req)
			answer(resp, asStatus(err))
		}, nil
	}
}

// close closes every group transport; later groups come closed.
func (c *core) close() {
	c.mu.Lock()
	c.closed = true
	groups := c.groups
	c.groups = map[string]*group{}
	c.mu.Unlock()
	for _, g := range groups {
		g.shut()
	}
}
