package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// clientLink is this node's end of one stream it opened to a peer: it sends
// requests and matches the answers that come back to them by id.
type clientLink struct {
	*link
	peer  string
	heard *heard
	from  *lastHeard // the peer's entry in heard: marked at each frame
	// idle runs once the answers read so far are handed over and before
	// the reader waits for the peer (GRPCNetwork.OnAnswersRead).
	idle func()

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan *pb.Message
	calls   map[uint64]*asyncCall // Sends waiting for their answer (client_async.go)
	ended   bool                  // the stream ended: calls are failed, no more taken
	sweep   *time.Timer           // fails calls past Within's deadline (deadline.go)
	sweepAt time.Time             // when sweep fires; zero: not set
}

func newClientLink(ctx context.Context, peer string, s frameStream, stats *counters, limit int, h *heard, from *lastHeard, idle func()) *clientLink {
	c := &clientLink{link: newLink(ctx, s, stats, limit), peer: peer, heard: h, from: from, idle: idle, pending: map[uint64]chan *pb.Message{}, calls: map[uint64]*asyncCall{}}
	context.AfterFunc(c.ctx, c.failCalls)
	go c.read()
	return c
}

// read hands each answer to its request until the stream ends, then fails
// the requests still waiting. Whenever the next frame is not read yet
// whole (its Recv would wait for the peer), and when the stream ends, it
// runs idle.
func (c *clientLink) read() {
	for {
		f, err := c.s.Recv()
		if err != nil {
			c.cancel(err)
			c.idle()
			return
		}
		c.heard.mark(c.from)
		c.stats.framesReceived.Add(1)
		c.stats.messagesReceived.Add(uint64(len(f.GetMessages())))
		for _, m := range f.GetMessages() {
			c.mu.Lock()
			ch := c.pending[m.GetId()]
			delete(c.pending, m.GetId())
			a := c.takeCallLocked(m.GetId())
			c.mu.Unlock()
			switch {
			case ch != nil:
				ch <- m // buffered: one answer per request
			case a != nil:
				a.answer(m)
			}
		}
		if !frameBuffered(c.s) {
			c.idle()
		}
	}
}

// start registers a new request id and returns it with the channel its
// answer arrives on.
func (c *clientLink) start() (uint64, chan *pb.Message) {
	ch := make(chan *pb.Message, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.pending[c.next] = ch
	return c.next, ch
}

func (c *clientLink) forget(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
}

// roundTrip sends m (its id set here) and waits for its answer. If ctx ends
// first, the peer is told to stop (a cancel message) and the status is
// Canceled or DeadlineExceeded; if the stream ends, the stream's status
// (Unavailable when the peer went away).
func (c *clientLink) roundTrip(ctx context.Context, m *pb.Message) (*pb.Message, error) {
	id, ch, err := c.send(ctx, m)
	if err != nil {
		return nil, err
	}
	return c.wait(ctx, id, ch)
}

// send queues request m (its id and timeout set here); wait gets its answer.
func (c *clientLink) send(ctx context.Context, m *pb.Message) (uint64, chan *pb.Message, error) {
	id, ch := c.start()
	m.Id = id
	if dl, ok := ctx.Deadline(); ok {
		m.TimeoutUs = max(time.Until(dl).Microseconds(), 1)
	}
	if err := c.put(ctx, m); err != nil {
		c.forget(id)
		return 0, nil, c.failure(ctx, err)
	}
	return id, ch, nil
}

func (c *clientLink) wait(ctx context.Context, id uint64, ch chan *pb.Message) (*pb.Message, error) {
	select {
	case r := <-ch:
		if e, ok := r.GetBody().(*pb.Message_Error); ok {
			return nil, status.Error(codes.Code(e.Error.GetCode()), e.Error.GetMessage())
		}
		return r, nil
	case <-ctx.Done():
		c.forget(id)
		_ = c.put(context.Background(), &pb.Message{Id: id, Body: &pb.Message_Cancel{Cancel: &pb.Cancel{}}})
		return nil, ctxStatus(ctx, c.peer)
	case <-c.ctx.Done():
		c.forget(id)
		return nil, c.failure(ctx, errLinkClosed)
	}
}

// failure is the status of a request that could not be sent or answered.
func (c *clientLink) failure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctxStatus(ctx, c.peer)
	}
	cause := context.Cause(c.ctx)
	if cause == nil {
		cause = err
	}
	if s, ok := status.FromError(cause); ok && s.Code() != codes.Unknown && s.Code() != codes.Canceled {
		return s.Err() // e.g. Unauthenticated, Unavailable from grpc
	}
	if errors.Is(cause, io.EOF) || errors.Is(cause, errLinkClosed) || errors.Is(cause, context.Canceled) {
		return unavailable(c.peer, errLinkClosed)
	}
	return unavailable(c.peer, fmt.Errorf("stream: %w", cause))
}

// snapshotChunk is the size of one chunk of an InstallSnapshot's data.
const snapshotChunk = 256 << 10

// sendSnapshot sends the InstallSnapshot request m, then size bytes of r in
// chunks, and waits for the answer. An answer that comes early (the group
// is not open, Raft refused) ends the sending.
func (c *clientLink) sendSnapshot(ctx context.Context, m *pb.Message, size int64, r io.Reader) (*pb.Message, error) {
	id, ch := c.start()
	m.Id = id
	if dl, ok := ctx.Deadline(); ok {
		m.TimeoutUs = max(time.Until(dl).Microseconds(), 1)
	}
	fail := func(err error) (*pb.Message, error) {
		c.forget(id)
		_ = c.put(context.Background(), &pb.Message{Id: id, Body: &pb.Message_Cancel{Cancel: &pb.Cancel{}}})
		return nil, err
	}
	if err := c.put(ctx, m); err != nil {
		c.forget(id)
		return nil, c.failure(ctx, err)
	}
	for left := size; ; {
		if len(ch) > 0 {
			break // answered early
		}
		k := min(left, snapshotChunk)
		buf := make([]byte, k) // queued until written: a buffer per chunk
		if _, err := io.ReadFull(r, buf); err != nil {
			return fail(status.Errorf(codes.Internal, "reading the snapshot: %v", err))
		}
		left -= k
		chunk := &pb.Message{Id: id, Body: &pb.Message_SnapshotChunk{SnapshotChunk: &pb.SnapshotChunk{Data: buf, Last: left == 0}}}
		if err := c.put(ctx, chunk); err != nil {
			return fail(c.failure(ctx, err))
		}
		if left == 0 {
			break
		}
	}
	return c.wait(ctx, id, ch)
}
