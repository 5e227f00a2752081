package transport

import (
	"context"
	"sync"
	"time"

	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Call deadlines without a timer per call. A forwarded publish, settlement
// or delivery is a call, tens of thousands a second between two nodes; a
// context.WithTimeout for each (on the caller, and again for the request
// on the serving node) cost a runtime timer set and stopped, two
// registrations with parent contexts and their allocations: 6% of the
// brokers' CPU a message forwarded (s5 through another node, 2 CPUs).
// So a caller marks its Sends with Within (a deadline, no timer), one
// timer per link fails whichever of its calls outlive theirs, and the
// serving node's request context starts its timer only once someone
// waits on it (most forwarded calls are answered without).

// Within marks ctx for a Send that fails with DeadlineExceeded once d has
// passed without its answer, as under context.WithTimeout(ctx, d), but
// without a timer of its own once it is on its way: the Network watches
// the deadlines of all the calls on a connection with one. A Send that
// waits first (for its connection to open, for room on it) waits no
// longer than the deadline, with a timer for that wait only. ctx still
// ends the call early (cancelled, or its own deadline). The peer gets the
// deadline with the request, as with a context's. For Call, use a
// context's deadline.
func Within(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, withinKey{}, time.Now().Add(d))
}

type withinKey struct{}

// within is the deadline Within gave ctx, if any.
func within(ctx context.Context) (time.Time, bool) {
	dl, ok := ctx.Value(withinKey{}).(time.Time)
	return dl, ok
}

// sendDeadline is when a Send with ctx must end: the earlier of Within's
// deadline (dl, if ok) and ctx's own.
func sendDeadline(ctx context.Context, dl time.Time, ok bool) (time.Time, bool) {
	if cdl, cok := ctx.Deadline(); cok && (!ok || cdl.Before(dl)) {
		return cdl, true
	}
	return dl, ok
}

// withDeadline is ctx ending at Within's deadline too, for the paths
// that watch a context anyway (the in-memory twin, calls to this node):
// the same semantics, a timer's cost.
func withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := within(ctx); ok {
		return context.WithDeadline(ctx, dl)
	}
	return ctx, func() {}
}

// armLocked makes sure the link's deadline timer fires by dl. c.mu is
// held.
func (c *clientLink) armLocked(dl time.Time) {
	if !c.sweepAt.IsZero() && !dl.Before(c.sweepAt) {
		return
	}
	c.sweepAt = dl
	if c.sweep == nil {
		c.sweep = time.AfterFunc(time.Until(dl), c.expire)
		return
	}
	c.sweep.Reset(time.Until(dl))
}

// expire fails the calls past their deadline (the peer is told to drop
// them) and sets the timer for the next deadline.
func (c *clientLink) expire() {
	now := time.Now()
	type late struct {
		id uint64
		a  *asyncCall
	}
	var lates []late
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.sweepAt = time.Time{}
	var next time.Time
	for id, a := range c.calls {
		switch {
		case a.deadline.IsZero():
		case !a.deadline.After(now):
			delete(c.calls, id)
			lates = append(lates, late{id, a})
		case next.IsZero() || a.deadline.Before(next):
			next = a.deadline
		}
	}
	if !next.IsZero() {
		c.armLocked(next)
	}
	c.mu.Unlock()
	for _, l := range lates {
		l.a.stop()
		_ = c.put(Immediate(context.Background()), &pb.Message{Id: l.id, Body: &pb.Message_Cancel{Cancel: &pb.Cancel{}}})
		l.a.fn(nil, status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error()))
	}
}

// requestCtx is a request's context on the serving node: it ends with
// its stream, the caller's cancel or its deadline, like the
// context.WithDeadline it stands for, which it makes only once someone
// watches it (Done, or Err past its end): a start that answers without
// waiting costs no timer.
type requestCtx struct {
	parent   context.Context
	deadline time.Time // zero: none

	mu        sync.Mutex
	ctx       context.Context // the real one, once made
	cancelCtx context.CancelFunc
	cancelled bool // cancel came first
}

func newRequestCtx(parent context.Context, deadline time.Time) (*requestCtx, context.CancelFunc) {
	r := &requestCtx{parent: parent, deadline: deadline}
	return r, r.cancel
}

// real makes (once) and returns the context r stands for.
func (r *requestCtx) real() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		if r.deadline.IsZero() || r.cancelled {
			r.ctx, r.cancelCtx = context.WithCancel(r.parent)
		} else {
			r.ctx, r.cancelCtx = context.WithDeadline(r.parent, r.deadline)
		}
		if r.cancelled {
			r.cancelCtx()
		}
	}
	return r.ctx
}

func (r *requestCtx) cancel() {
	r.mu.Lock()
	r.cancelled = true
	cancel := r.cancelCtx
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (r *requestCtx) Deadline() (time.Time, bool) { return r.deadline, !r.deadline.IsZero() }

func (r *requestCtx) Done() <-chan struct{} { return r.real().Done() }

func (r *requestCtx) Err() error {
	r.mu.Lock()
	made, cancelled := r.ctx != nil, r.cancelled
	r.mu.Unlock()
	if !made && !cancelled && r.parent.Err() == nil && (r.deadline.IsZero() || time.Now().Before(r.deadline)) {
		return nil
	}
	return r.real().Err()
}

// Value is the parent's while the real context is not made and r has not
// ended, then the real one's (so a context derived from r after a Done
// registers with the real one, as with any cancelable context, and starts
// no goroutine; context.Cause of an ended r is its own).
func (r *requestCtx) Value(key any) any {
	r.mu.Lock()
	ctx := r.ctx
	r.mu.Unlock()
	if ctx == nil && r.Err() == nil {
		return r.parent.Value(key)
	}
	return r.real().Value(key)
}

func (r *requestCtx) String() string { return "transport.requestCtx" }
