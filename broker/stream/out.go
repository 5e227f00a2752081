package stream

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
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
	secs    []section // file sections to send after buf[:at]
	wake    chan struct{}
	drained chan struct{} // closed when the writer takes the buffer
	closed  bool
	limit   int
	// closeAfter: the writer closes the socket once it has written the
	// buffer (after a server-initiated close or a fatal error).
	closeAfter bool
}

func newOutput(limit int) *output {
	// The buffers grow with what is sent: a connection that sends
	// little (one still in its handshake) holds little.
	return &output{wake: make(chan struct{}, 1), drained: make(chan struct{}), limit: limit}
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

// appendStaged queues the bytes of stage, a buffer the caller built and
// owns. When nothing is queued (the usual case: the writer took the last
// batch) the buffers are swapped instead of copied. It returns a buffer for
// the caller's next stage (stage itself, or the one it replaced), and false
// once the output is closed.
func (o *output) appendStaged(stage []byte) ([]byte, bool) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return stage[:0], false
	}
	if len(o.buf) == 0 && len(o.secs) == 0 {
		o.buf, stage = stage, o.buf
	} else {
		o.buf = append(o.buf, stage...)
	}
	o.mu.Unlock()
	o.kick()
	return stage[:0], true
}

// section is a piece of a file sent with sendfile at position at of the
// buffer; done receives the outcome (the caller keeps the file open
// until then).
type section struct {
	at   int
	f    *os.File
	off  int64
	n    int64
	done chan error
}

var errOutputClosed = errors.New("stream: connection output closed")

// appendSection queues fn's bytes followed by n bytes of f from off. The
// returned channel gets the outcome; nil when the output is closed.
func (o *output) appendSection(fn func([]byte) []byte, f *os.File, off, n int64) chan error {
	done := make(chan error, 1)
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.buf = fn(o.buf)
	o.secs = append(o.secs, section{at: len(o.buf), f: f, off: off, n: n, done: done})
	o.mu.Unlock()
	o.kick()
	return done
}

// send queues one encoded command.
func (o *output) send(c proto.Command) bool {
	return o.appendFn(func(b []byte) []byte { return proto.Encode(b, c) })
}

// waitRoom blocks while more than limit bytes are queued (deliveries'
// back-pressure), until ctx is done or the output closes.
func (o *output) waitRoom(ctx context.Context) bool {
	return o.waitBelow(ctx, o.limit)
}

// waitBelow blocks while n bytes or more are queued.
func (o *output) waitBelow(ctx context.Context, n int) bool {
	for {
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return false
		}
		if len(o.buf) < n {
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
	secs := o.secs
	o.secs = nil
	o.mu.Unlock()
	for _, s := range secs {
		s.done <- errOutputClosed
	}
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
		b, secs := o.buf, o.secs
		o.buf, o.secs = o.spare[:0], nil
		o.spare = nil // o.buf owns it now (appendStaged may hand it out)
		closeAfter := o.closeAfter
		close(o.drained)
		o.drained = make(chan struct{})
		o.mu.Unlock()
		if len(b) > 0 {
			_ = nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := writeWithSections(nc, b, secs); err != nil {
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

// writeWithSections writes b with the file sections spliced in at their
// positions (sendfile for TCP connections), telling each section's owner
// when it is sent.
func writeWithSections(nc net.Conn, b []byte, secs []section) error {
	pos := 0
	for i, s := range secs {
		if _, err := nc.Write(b[pos:s.at]); err != nil {
			failSections(secs[i:], err)
			return err
		}
		pos = s.at
		err := sendSection(nc, s)
		s.done <- err
		if err != nil {
			failSections(secs[i+1:], err)
			return err
		}
	}
	_, err := nc.Write(b[pos:])
	return err
}

func failSections(secs []section, err error) {
	for _, s := range secs {
		s.done <- err
	}
}

// sendSection sends n bytes of f from off: sendfile(2) when nc is a TCP
// connection (ReadFrom of a LimitedReader over an *os.File), a copy
// otherwise.
func sendSection(nc net.Conn, s section) error {
	if tc, ok := nc.(*net.TCPConn); ok {
		if _, err := s.f.Seek(s.off, io.SeekStart); err != nil {
			return err
		}
		n, err := tc.ReadFrom(io.LimitReader(s.f, s.n))
		if err == nil && n != s.n {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	n, err := io.Copy(nc, io.NewSectionReader(s.f, s.off, s.n))
	if err == nil && n != s.n {
		err = io.ErrUnexpectedEOF
	}
	return err
}
