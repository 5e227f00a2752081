package stream

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/warrenmq/warren/broker/stream/proto"
)

// output is a connection's queue of encoded frames. Any goroutine appends
// under mu; the writer goroutine swaps the buffer out and writes it with
// one syscall, so frames queued while a write runs go out together: the
// socket is flushed when the queue runs dry, not per frame.
type output struct {
	mu      sync.Mutex
	buf     []byte
	spare   []byte
	wake    chan struct{}
	drained chan struct{} // closed when the writer takes the buffer
	closed  bool
	limit   int
	// closeAfter: the writer closes the socket once it has written the
	// buffer (after a server-initiated close or a fatal error).
	closeAfter bool
}

func newOutput(limit int) *output {
	return &output{wake: make(chan struct{}, 1), drained: make(chan struct{}), limit: limit, buf: make([]byte, 0, 64<<10), spare: make([]byte, 0, 64<<10)}
}

func (o *output) kick() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// appendFn runs fn on the buffer under the lock (fn returns the new buffer)
// and wakes the writer. It reports false once the output is closed.
func (o *output) appendFn(fn func([]byte) []byte) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	o.buf = fn(o.buf)
	o.mu.Unlock()
	o.kick()
	return true
}

// send queues one encoded command.
func (o *output) send(c proto.Command) bool {
	return o.appendFn(func(b []byte) []byte { return proto.Encode(b, c) })
}

// waitRoom blocks while more than limit bytes are queued (deliveries'
// back-pressure), until ctx is done or the output closes.
func (o *output) waitRoom(ctx context.Context) bool {
	for {
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return false
		}
		if len(o.buf) < o.limit {
			o.mu.Unlock()
			return true
		}
		d := o.drained
		o.mu.Unlock()
		select {
		case <-d:
		case <-ctx.Done():
			return false
		}
	}
}

// finish marks the output to close the socket after what is queued.
func (o *output) finish() {
	o.mu.Lock()
	o.closeAfter = true
	o.mu.Unlock()
	o.kick()
}

// close stops the output at once; queued bytes are dropped.
func (o *output) close() {
	o.mu.Lock()
	if !o.closed {
		o.closed = true
		close(o.drained)
	}
	o.mu.Unlock()
	o.kick()
}

// run writes queued bytes to nc until the output is closed or a write
// fails. With heartbeat > 0 it queues a heartbeat when nothing was written
// for that long.
func (o *output) run(nc net.Conn, heartbeat func() time.Duration) error {
	hb := proto.Encode(nil, &proto.Heartbeat{})
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-o.wake:
		case now := <-tick.C:
			if d := heartbeat(); d > 0 && now.Sub(last) >= d {
				o.appendFn(func(b []byte) []byte { return append(b, hb...) })
			}
			continue
		}
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return nil
		}
		b := o.buf
		o.buf = o.spare[:0]
		closeAfter := o.closeAfter
		close(o.drained)
		o.drained = make(chan struct{})
		o.mu.Unlock()
		if len(b) > 0 {
			_ = nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := nc.Write(b); err != nil {
				o.close()
				return err
			}
			last = time.Now()
		}
		o.mu.Lock()
		if cap(b) <= 8<<20 {
			o.spare = b[:0]
		}
		o.mu.Unlock()
		if closeAfter {
			o.close()
			return nil
		}
	}
}
