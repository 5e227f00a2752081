package transport

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
)

// frameStream is one gRPC bidirectional stream of Frames, from either end.
type frameStream interface {
	Send(*pb.Frame) error
	Recv() (*pb.Frame, error)
}

// errLinkClosed is what a put on a closed link returns.
var errLinkClosed = errors.New("stream closed")

// link is the sending half of one stream, client's or server's end: a
// queue of messages and one writer that sends everything queued, up to
// frameBytes a frame, as soon as it is woken. While the writer sends, new
// messages pile up and go in the next frame: under load, many messages
// (heartbeats of many groups, appends of many groups) share a frame.
type link struct {
	s     frameStream
	stats *counters

	ctx    context.Context // ends when the stream ends
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	msgs    []*pb.Message
	sizes   []int
	spare   []*pb.Message
	bytes   int
	limit   int           // bytes queued before put waits
	drained chan struct{} // closed when the writer takes the queue
	wake    chan struct{}
	done    chan struct{} // closed when the writer returned
}

// frameBytes is the size a frame is filled to (a bigger message goes alone).
const frameBytes = 1 << 20

// queueBytes is how much a stream's queue holds before senders wait (a
// bigger message is let in alone).
const queueBytes = 4 << 20

func newLink(ctx context.Context, s frameStream, stats *counters, limit int) *link {
	lctx, cancel := context.WithCancelCause(ctx)
	l := &link{s: s, stats: stats, ctx: lctx, cancel: cancel, limit: limit,
		drained: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go l.write()
	return l
}

// put queues m for the peer, waiting while the queue holds limit bytes
// (not when ctx is marked Immediate).
func (l *link) put(ctx context.Context, m *pb.Message) error {
	size := m.SizeVT()
	now := immediate(ctx)
	for {
		l.mu.Lock()
		if err := l.ctx.Err(); err != nil {
			l.mu.Unlock()
			return errLinkClosed
		}
		if now || l.bytes == 0 || l.bytes+size <= l.limit {
			l.msgs = append(l.msgs, m)
			l.sizes = append(l.sizes, size)
			l.bytes += size
			l.mu.Unlock()
			select {
			case l.wake <- struct{}{}:
			default:
			}
			return nil
		}
		drained := l.drained
		l.mu.Unlock()
		select {
		case <-drained:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.ctx.Done():
			return errLinkClosed
		}
	}
}

// write sends what is queued whenever woken, until the stream ends.
func (l *link) write() {
	defer close(l.done)
	var sizes []int
	for {
		select {
		case <-l.wake:
		case <-l.ctx.Done():
			return
		}
		// Let the goroutines that are ready to queue something do so
		// first: it joins this frame (free when nothing else is runnable).
		runtime.Gosched()
		l.mu.Lock()
		msgs := l.msgs
		sizes = append(sizes[:0], l.sizes...)
		l.msgs, l.spare = l.spare[:0], nil
		l.sizes = l.sizes[:0]
		l.bytes = 0
		close(l.drained)
		l.drained = make(chan struct{})
		l.mu.Unlock()

		for start := 0; start < len(msgs); {
			end, n := start, 0
			for end < len(msgs) && (end == start || n+sizes[end] <= frameBytes) {
				n += sizes[end]
				end++
			}
			if err := l.s.Send(&pb.Frame{Messages: msgs[start:end]}); err != nil {
				if !errors.Is(err, io.EOF) {
					l.cancel(err)
				} // io.EOF: the stream ended and the reader gets its status
				return
			}
			l.stats.framesSent.Add(1)
			l.stats.messagesSent.Add(uint64(end - start))
			start = end
		}
		clear(msgs)
		l.mu.Lock()
		if l.spare == nil {
			l.spare = msgs[:0]
		}
		l.mu.Unlock()
	}
}

// Stats counts a gRPC Network's traffic since it started: frames are
// stream writes, each carrying one or more messages (requests, answers,
// snapshot chunks); PingsSent counts the node heartbeats sent (each is
// a message too).
type Stats struct {
	FramesSent, MessagesSent         uint64
	FramesReceived, MessagesReceived uint64
	PingsSent                        uint64
}

// counters are the live Stats.
type counters struct {
	framesSent, messagesSent         atomic.Uint64
	framesReceived, messagesReceived atomic.Uint64
	pingsSent                        atomic.Uint64
	pingWakes                        atomic.Uint64 // ping timers fired (tests)
}

func (c *counters) load() Stats {
	return Stats{
		FramesSent: c.framesSent.Load(), MessagesSent: c.messagesSent.Load(),
		FramesReceived: c.framesReceived.Load(), MessagesReceived: c.messagesReceived.Load(),
		PingsSent: c.pingsSent.Load(),
	}
}
