package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// errIdle is what a blockingSocket's Read returns when nothing came for its
// idle time.
var errIdle = errors.New("no data for the idle time")

// blockingSocket reads and writes a TCP connection with blocking system
// calls on a duplicate of its descriptor (net.TCPConn.File), bypassing Go's
// network poller: a consumer that does nothing but read its one socket then
// makes one read(2) per wake-up, instead of a read that finds the buffer
// empty, an epoll_wait and a scheduler hand-off. On a machine whose cores
// the broker and the load generator share, that client time is time the
// broker does not get. A blocked Read returns errIdle after the idle time
// (SO_RCVTIMEO), and io.EOF or an error after Abort.
type blockingSocket struct {
	conn net.Conn
	file *os.File
	fd   int
}

// newBlockingSocket takes over conn, which must be a *net.TCPConn; conn
// itself is not to be read or written afterwards.
func newBlockingSocket(conn net.Conn) (*blockingSocket, error) {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil, fmt.Errorf("blocking socket: %T is not a TCP connection", conn)
	}
	f, err := tc.File()
	if err != nil {
		return nil, fmt.Errorf("blocking socket: %w", err)
	}
	// Fd puts the descriptor in blocking mode. Reads and writes are plain
	// system calls on it: through f, a read that times out (EAGAIN) would
	// wait on the poller for ever.
	return &blockingSocket{conn: conn, file: f, fd: int(f.Fd())}, nil
}

// SetIdle makes a Read that waits longer than d fail with errIdle (0: wait
// for ever).
func (s *blockingSocket) SetIdle(d time.Duration) error {
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	if err := syscall.SetsockoptTimeval(s.fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("set SO_RCVTIMEO: %w", err)
	}
	return nil
}

func (s *blockingSocket) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(s.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, errIdle
		case err != nil:
			return 0, fmt.Errorf("read: %w", err)
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (s *blockingSocket) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := syscall.Write(s.fd, p[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("write: %w", err)
		}
		n += m
	}
	return n, nil
}

// Abort wakes a blocked Read or Write (safe from any goroutine): the
// connection is shut down, Close still releases it.
func (s *blockingSocket) Abort() { _ = syscall.Shutdown(s.fd, syscall.SHUT_RDWR) }

func (s *blockingSocket) Close() error {
	err := s.file.Close()
	if cerr := s.conn.Close(); err == nil {
		err = cerr
	}
	return err
}
