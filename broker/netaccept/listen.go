package netaccept

import (
	"context"
	"fmt"
	"net"
	"syscall"
)

// MaxMSS is the largest segment size TCP_MAXSEG accepts.
const MaxMSS = 32767

// Listen opens a TCP listener on addr whose connections send and receive
// segments of at most mss bytes (TCP_MAXSEG on the listening socket, which
// its connections inherit and announce in their SYN-ACK); mss 0 keeps the
// route's. It matters on loopback, whose 64 KiB MTU makes segments as large
// as a client's whole receive window: with a window a few bytes short of
// one segment the sender holds a full queue back (silly-window avoidance)
// and moves one window per zero-window probe, every 200 ms. Real networks'
// segments (1460, 8960 bytes) are well below any value used here.
func Listen(ctx context.Context, addr string, mss int) (net.Listener, error) {
	if mss < 0 || mss > MaxMSS {
		return nil, fmt.Errorf("listen on %s: segment size %d out of range 0..%d", addr, mss, MaxMSS)
	}
	lc := net.ListenConfig{}
	if mss > 0 {
		lc.Control = func(network, address string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, mss)
			}); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("set TCP_MAXSEG %d: %w", mss, serr)
			}
			return nil
		}
	}
	return lc.Listen(ctx, "tcp", addr)
}

// SegmentSize reports the current maximum segment size of a TCP connection
// (TCP_MAXSEG).
func SegmentSize(c net.Conn) (int, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, fmt.Errorf("segment size: %T is not a TCP connection", c)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("segment size: %w", err)
	}
	var mss int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		mss, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG)
	}); err != nil {
		return 0, fmt.Errorf("segment size: %w", err)
	}
	if serr != nil {
		return 0, fmt.Errorf("segment size: getsockopt TCP_MAXSEG: %w", serr)
	}
	return mss, nil
}
