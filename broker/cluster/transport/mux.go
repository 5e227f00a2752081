package transport

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// muxListener shares the cluster port between the gRPC server and the call
// lanes (lane.go): it accepts every connection, reads its first bytes and
// hands a lane's to lane, any other (an HTTP/2 preface, a TLS ClientHello)
// to the gRPC server through Accept, its first bytes replayed. A
// connection that sends nothing within laneHandshakeTime is closed.
type muxListener struct {
	ctx  context.Context // ends with the Network: connections being told apart close
	ln   net.Listener
	lane func(net.Conn) // runs a lane on its own goroutine
	// userTimeout is set on every connection (setUserTimeout): gRPC sets
	// it only on the *net.TCPConn it accepts itself, not on a wrapper.
	userTimeout time.Duration

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error // why the accept loop stopped, once done is closed
}

func newMuxListener(ctx context.Context, ln net.Listener, userTimeout time.Duration, lane func(net.Conn)) *muxListener {
	m := &muxListener{ctx: ctx, ln: ln, lane: lane, userTimeout: userTimeout, conns: make(chan net.Conn), done: make(chan struct{})}
	go m.accept()
	return m
}

func (m *muxListener) accept() {
	var delay time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if ne, ok := err.(interface{ Temporary() bool }); ok && ne.Temporary() {
				// Out of file descriptors and the like: back off and
				// accept again, as net/http and gRPC do.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(delay):
					continue
				case <-m.done:
					return
				}
			}
			m.stop(err)
			return
		}
		delay = 0
		go m.classify(c)
	}
}

// classify reads c's first bytes and hands it on.
func (m *muxListener) classify(c net.Conn) {
	setUserTimeout(c, m.userTimeout)
	_ = c.SetReadDeadline(time.Now().Add(laneHandshakeTime))
	stop := context.AfterFunc(m.ctx, func() { _ = c.Close() })
	head := make([]byte, len(laneMagic))
	n, err := io.ReadFull(c, head)
	if !stop() || err != nil && n == 0 {
		_ = c.Close()
		return
	}
	if err == nil && bytes.Equal(head, []byte(laneMagic)) {
		m.lane(c)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	select {
	case m.conns <- &replayConn{Conn: c, head: head[:n]}:
	case <-m.done:
		_ = c.Close()
	}
}

func (m *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, m.err
	}
}

func (m *muxListener) stop(err error) {
	m.once.Do(func() {
		m.err = err
		close(m.done)
	})
}

// Close stops accepting (the gRPC server calls it when it stops).
func (m *muxListener) Close() error {
	m.stop(net.ErrClosed)
	return m.ln.Close()
}

func (m *muxListener) Addr() net.Addr { return m.ln.Addr() }

// replayConn is a connection whose first bytes were read already: Read
// gives them again first.
type replayConn struct {
	net.Conn
	head []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
