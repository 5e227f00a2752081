package sockio

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrNotSocket is returned by New for a connection without a file
// descriptor (TLS, in-memory pipes): use the net.Conn itself.
var ErrNotSocket = errors.New("sockio: connection has no raw file descriptor")

// Spinners bounds how many Sockets busy-poll at once, server-wide. The
// zero value allows none.
type Spinners struct {
	max  int32
	busy atomic.Int32
}

// NewSpinners allows n Sockets to spin at once; n <= 0 allows half the
// processors Go schedules on (at least one).
func NewSpinners(n int) *Spinners {
	if n <= 0 {
		n = max(1, runtime.GOMAXPROCS(0)/2)
	}
	return &Spinners{max: int32(n)}
}

func (s *Spinners) acquire() bool {
	if s == nil {
		return false
	}
	for {
		n := s.busy.Load()
		if n >= s.max {
			return false
		}
		if s.busy.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *Spinners) release() { s.busy.Add(-1) }

// BusyPoll says when a Socket's reads spin before they block.
type BusyPoll struct {
	// For is the longest one read spins; 0 never spins.
	For time.Duration
	// Spinners is the budget shared with the server's other sockets.
	Spinners *Spinners
	// Want reports whether a reply is due (checked before each spin).
	Want func() bool
	// TimedOut is called when a spin ended without data.
	TimedOut func()
}

// Socket reads and writes a connection's file descriptor directly.
//
// Read is for one goroutine (the connection's reader); WriteNow may be
// called from another, but by one at a time (the caller's output lock).
type Socket struct {
	rc   syscall.RawConn
	poll BusyPoll
}

// New returns nc's Socket, or ErrNotSocket.
func New(nc net.Conn, poll BusyPoll) (*Socket, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, ErrNotSocket
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotSocket, err)
	}
	if poll.For <= 0 || poll.Spinners == nil || poll.Want == nil {
		poll = BusyPoll{}
	}
	return &Socket{rc: rc, poll: poll}, nil
}

// Read implements io.Reader: it returns what the socket holds, spinning
// first (see BusyPoll) and then waiting in the runtime's poller while it
// holds nothing. It honours the connection's read deadline.
func (s *Socket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var err error
	rerr := s.rc.Read(func(fd uintptr) bool {
		m, e := readNow(fd, p)
		if e == syscall.EAGAIN && s.poll.For > 0 {
			m, e = s.spin(fd, p)
		}
		switch {
		case e == syscall.EAGAIN:
			return false // wait in the poller, then call again
		case e != nil:
			err = e
		case m == 0:
			err = io.EOF
		default:
			n = m
		}
		return true
	})
	if rerr != nil {
		return 0, rerr
	}
	return n, err
}

// spin re-reads fd until data comes, the poll's time is up, or a reply
// is no longer due.
func (s *Socket) spin(fd uintptr, p []byte) (int, error) {
	if !s.poll.Want() || !s.poll.Spinners.acquire() {
		return 0, syscall.EAGAIN
	}
	defer s.poll.Spinners.release()
	deadline := time.Now().Add(s.poll.For)
	for {
		// Let this P's other goroutines run between reads. (Yielding the
		// thread too, sched_yield(2), measured slower: the reader then
		// loses its CPU to whatever else is runnable on it.)
		runtime.Gosched()
		m, e := readNow(fd, p)
		if e != syscall.EAGAIN {
			return m, e
		}
		if !s.poll.Want() {
			return 0, e
		}
		if time.Now().After(deadline) {
			if s.poll.TimedOut != nil {
				s.poll.TimedOut()
			}
			return 0, e
		}
	}
}

// readNow is readFD, retried when a signal interrupted it (the poller,
// edge-triggered, would not wake for data that is already there).
func readNow(fd uintptr, p []byte) (int, error) {
	for {
		n, err := readFD(fd, p)
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// WriteNow writes as much of p as the socket takes without blocking and
// returns how much that was; a full socket is not an error.
func (s *Socket) WriteNow(p []byte) (int, error) {
	n := 0
	var err error
	werr := s.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, e := writeFD(fd, p[n:])
			if m > 0 {
				n += m
			}
			if e == syscall.EINTR {
				continue
			}
			if e == syscall.EAGAIN {
				break
			}
			if e != nil {
				err = e
				break
			}
			if m <= 0 {
				break
			}
		}
		return true // never wait for room here
	})
	if werr != nil {
		return n, werr
	}
	return n, err
}
