package transport

import (
	"context"
	"time"

	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// asyncCall is a request Sent without a goroutine waiting for it: fn gets
// its answer on the stream's reader, or its failure when its context or the
// stream ends, once.
type asyncCall struct {
	fn       func(*pb.Message, error)
	stop     func() bool // stops the watch of the request's context
	deadline time.Time   // Within's, watched by the link's timer once queued (deadline.go); zero: not (yet)
}

func (a *asyncCall) answer(m *pb.Message) {
	a.stop()
	if e, ok := m.GetBody().(*pb.Message_Error); ok {
		a.fn(nil, status.Error(codes.Code(e.Error.GetCode()), e.Error.GetMessage()))
		return
	}
	a.fn(m, nil)
}

// takeCallLocked removes the call id is waiting for (nil if none). c.mu is
// held.
func (c *clientLink) takeCallLocked(id uint64) *asyncCall {
	a := c.calls[id]
	if a != nil {
		delete(c.calls, id)
	}
	return a
}

func (c *clientLink) takeCall(id uint64) *asyncCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takeCallLocked(id)
}

// sendAsync queues request m (its id and timeout set here); fn gets the
// answer or the failure, once, on a goroutine of the link. An error means
// m was not sent and fn is not called.
func (c *clientLink) sendAsync(ctx context.Context, m *pb.Message, fn func(*pb.Message, error)) error {
	a := &asyncCall{fn: fn}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return c.failure(ctx, errLinkClosed)
	}
	c.next++
	id := c.next
	c.mu.Unlock()
	m.Id = id
	wdl, watched := within(ctx)
	if dl, ok := sendDeadline(ctx, wdl, watched); ok {
		m.TimeoutUs = max(time.Until(dl).Microseconds(), 1)
	}
	a.stop = context.AfterFunc(ctx, func() {
		if c.takeCall(id) != nil {
			_ = c.put(context.Background(), &pb.Message{Id: id, Body: &pb.Message_Cancel{Cancel: &pb.Cancel{}}})
			fn(nil, ctxStatus(ctx, c.peer))
		}
	})
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		a.stop()
		return c.failure(ctx, errLinkClosed)
	}
	c.calls[id] = a // a.stop is set: whoever takes a may stop the watch
	c.mu.Unlock()
	if ctx.Err() != nil && c.takeCall(id) != nil {
		// The context ended before the call was registered: its watch
		// ran and found nothing to fail.
		a.stop()
		fn(nil, ctxStatus(ctx, c.peer))
		return nil
	}
	if err := c.put(ctx, m); err != nil {
		if c.takeCall(id) == nil {
			return nil // its context or the stream ended meanwhile: fn was told
		}
		a.stop()
		return c.failure(ctx, err)
	}
	if watched {
		// Watched once queued (a put that waited for room waited no
		// longer than wdl): the Cancel the link's timer sends then
		// follows the request, so the peer never starts a call its
		// caller has failed already.
		c.mu.Lock()
		if c.calls[id] == a {
			a.deadline = wdl
			c.armLocked(wdl)
		}
		c.mu.Unlock()
	}
	return nil
}

// failCalls fails the calls still waiting once the stream ended.
func (c *clientLink) failCalls() {
	c.mu.Lock()
	c.ended = true
	if c.sweep != nil {
		c.sweep.Stop()
	}
	calls := c.calls
	c.calls = map[uint64]*asyncCall{}
	c.mu.Unlock()
	for _, a := range calls {
		a.stop()
		a.fn(nil, c.failure(context.Background(), errLinkClosed))
	}
}
