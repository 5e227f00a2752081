package stream

import (
	"context"
	"net"
	"syscall"
)

// ListenMSS is the TCP maximum segment size the stream listener asks for.
// On loopback (64 KiB MTU) a client with small socket buffers — the Go
// client's default is 8 KiB — otherwise advertises a receive window below
// one segment: TCP's silly-window avoidance and delayed ACKs then stall
// every window for tens of milliseconds, and throughput falls to a few
// thousand messages per second. With segments of 8 KiB the windows work.
// Real networks have smaller MSS (1460, 8960 with jumbo frames), so this
// changes nothing there.
const ListenMSS = 8192

// Listen opens a TCP listener for the stream protocol on addr, with
// ListenMSS on its sockets.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, ListenMSS)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(ctx, "tcp", addr)
}
