package transport

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The port's connections, gRPC's and lanes alike, get TCP_USER_TIMEOUT
// (KeepaliveInterval): the accepted end (through the mux) and a dialled
// lane.
func TestConnectionsGetTheUserTimeout(t *testing.T) {
	userTimeout := func(c net.Conn) int {
		rc, err := c.(*net.TCPConn).SyscallConn()
		must(t, err)
		var v int
		var gerr error
		must(t, rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) }))
		must(t, gerr)
		return v
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	accepted := make(chan net.Conn, 1)
	m := newMuxListener(t.Context(), ln, 7*time.Second, func(c net.Conn) { accepted <- c })
	defer m.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	must(t, err)
	defer c.Close()
	_, err = c.Write([]byte(laneMagic))
	must(t, err)
	if got := userTimeout(<-accepted); got != 7000 {
		t.Fatalf("accepted connection: TCP_USER_TIMEOUT %d ms, want 7000", got)
	}
	a := grpcNet(t, "n1", func(c *Config) { c.KeepaliveInterval = 11 * time.Second })
	b := grpcNet(t, "n2", nil)
	s, err := a.dialLane(t.Context(), "n2", b.Addr().String())
	must(t, err)
	defer s.c.Close()
	if got := userTimeout(s.c); got != 11000 {
		t.Fatalf("dialled lane: TCP_USER_TIMEOUT %d ms, want 11000", got)
	}
}
