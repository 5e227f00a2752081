package transport

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT on c (a *net.TCPConn; others are
// left alone): data the peer has not acknowledged for d closes the
// connection, as gRPC sets it on the connections it makes and accepts
// itself, so a black-holed peer's connections end even while writes are
// under way (TCP's own retransmissions would take minutes).
func setUserTimeout(c net.Conn, d time.Duration) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
	})
}
