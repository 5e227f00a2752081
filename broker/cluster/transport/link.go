package transport

import (
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
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

// inlineStream is a frameStream that can also write without blocking
// (a call lane over plain TCP).
type inlineStream interface {
	frameStream
	// nonBlocking reports whether trySend works (it does not over TLS).
	nonBlocking() bool
	// trySend writes f as far as the socket takes it at once; rest is
	// what it did not take (sendRest sends it, before anything else).
	trySend(f *pb.Frame) (rest []byte, err error)
	sendRest(b []byte) error
}

// link is the sending half of one stream, client's or server's end: a
// queue of messages and one writer that sends everything queued, up to
// frameBytes a frame, as soon as it is woken. While the writer sends, new
// messages pile up and go in the next frame: under load, many messages
// (heartbeats of many groups, appends of many groups) share a frame.
//
// On a stream that writes without blocking (inlineStream), a put that
// finds nobody writing, and at most a frame queued, sends it itself, from
// its own goroutine, instead of waking the writer: one hand-off fewer on
// the way of every call and answer. The socket taking less than the whole, the rest and
// everything queued after it go to the writer. One goroutine at a time
// holds the write turn (writing), the writer's or a put's, so frames go
// out whole and in the order they were queued.
type link struct {
	s      frameStream
	inline inlineStream // s, when it writes without blocking; else nil
	stats  *counters

	ctx    context.Context // ends when the stream ends
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	msgs    []*pb.Message
	sizes   []int
	spare   []*pb.Message // msgs' array for reuse, and sizes'
	spareSz []int
	bytes   int
	limit   int           // bytes queued before put waits
	drained chan struct{} // closed when the writer takes the queue
	writing bool          // a goroutine holds the write turn
	rest    []byte        // bytes of a frame an inline put left unsent: the writer's first
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
	if is, ok := s.(inlineStream); ok && is.nonBlocking() {
		l.inline = is
	}
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
			switch {
			case l.writing: // the writing goroutine takes it next (release)
				l.mu.Unlock()
			case l.inline != nil && l.rest == nil && l.bytes <= frameBytes:
				l.writing = true
				msgs, sizes := l.takeLocked()
				l.mu.Unlock()
				l.sendInline(msgs, sizes)
			default:
				l.mu.Unlock()
				l.wakeWriter()
			}
			return nil
		}
		drained := l.drained
		l.mu.Unlock()
		if err := l.waitRoom(ctx, drained); err != nil {
			return err
		}
	}
}

// waitRoom waits until drained is closed, ctx (or Within's deadline:
// a timer only for a put that waits) or the link ends.
func (l *link) waitRoom(ctx context.Context, drained <-chan struct{}) error {
	wctx, cancel := withDeadline(ctx)
	defer cancel()
	select {
	case <-drained:
		return nil
	case <-wctx.Done():
		return wctx.Err()
	case <-l.ctx.Done():
		return errLinkClosed
	}
}

func (l *link) wakeWriter() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// takeLocked takes the queue and its sizes and lets the puts that wait
// for room go on.
func (l *link) takeLocked() ([]*pb.Message, []int) {
	msgs, sizes := l.msgs, l.sizes
	l.msgs, l.spare = l.spare[:0], nil
	l.sizes, l.spareSz = l.spareSz[:0], nil
	l.bytes = 0
	close(l.drained)
	l.drained = make(chan struct{})
	return msgs, sizes
}

// release gives the write turn back, and the arrays of what was taken
// for reuse; what was queued meanwhile is the writer's.
func (l *link) release(msgs []*pb.Message, sizes []int) {
	clear(msgs)
	l.mu.Lock()
	l.writing = false
	if l.spare == nil {
		l.spare, l.spareSz = msgs[:0], sizes[:0]
	}
	more := len(l.msgs) > 0 || l.rest != nil
	l.mu.Unlock()
	if more {
		l.wakeWriter()
	}
}

// frames calls send with msgs cut into frames of up to frameBytes, until
// send returns false.
func frames(msgs []*pb.Message, sizes []int, send func(start, end int) bool) {
	for start := 0; start < len(msgs); {
		end, n := start, 0
		for end < len(msgs) && (end == start || n+sizes[end] <= frameBytes) {
			n += sizes[end]
			end++
		}
		if !send(start, end) {
			return
		}
		start = end
	}
}

// sent counts a frame of n messages, or ends the link on err.
func (l *link) sent(n int, err error) bool {
	if err != nil {
		if !errors.Is(err, io.EOF) {
			l.cancel(err)
		} // io.EOF: the stream ended and the reader gets its status
		return false
	}
	l.stats.framesSent.Add(1)
	l.stats.messagesSent.Add(uint64(n))
	return true
}

// sendInline sends msgs from the put's goroutine, which holds the write
// turn, without blocking: a frame the socket does not take whole leaves
// its rest, and the messages after it, to the writer.
func (l *link) sendInline(msgs []*pb.Message, sizes []int) {
	frames(msgs, sizes, func(start, end int) bool {
		rest, err := l.inline.trySend(&pb.Frame{Messages: msgs[start:end]})
		if err != nil {
			l.cancel(err) // whatever it was: what follows must not go
			return false
		}
		l.sent(end-start, nil)
		if rest != nil {
			l.mu.Lock()
			l.rest = rest
			l.msgs = append(slices.Clone(msgs[end:]), l.msgs...)
			l.sizes = append(slices.Clone(sizes[end:]), l.sizes...)
			for _, n := range sizes[end:] {
				l.bytes += n
			}
			l.mu.Unlock()
			return false
		}
		return true
	})
	l.release(msgs, sizes)
}

// write sends what is queued whenever woken, until the stream ends.
func (l *link) write() {
	defer close(l.done)
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
		if l.writing { // a put is sending; it wakes the writer if it leaves any
			l.mu.Unlock()
			continue
		}
		l.writing = true
		rest := l.rest
		l.rest = nil
		msgs, sizes := l.takeLocked()
		l.mu.Unlock()

		ok := true
		if rest != nil { // counted when trySend sent its start
			if err := l.inline.sendRest(rest); err != nil {
				ok = l.sent(0, err)
			}
		}
		if ok {
			frames(msgs, sizes, func(start, end int) bool {
				ok = l.sent(end-start, l.s.Send(&pb.Frame{Messages: msgs[start:end]}))
				return ok
			})
		}
		if !ok {
			return
		}
		l.release(msgs, sizes)
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
