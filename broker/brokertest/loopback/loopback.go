// Package loopback gives tests both ends of a real loopback TCP
// connection. It imports nothing of Warren's, so any package's tests can
// use it without an import cycle through brokertest.
package loopback

import (
	"net"
	"testing"
)

// Pair returns both ends of a loopback TCP connection, the accepted one
// first; both are closed when the test ends.
func Pair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		client.Close()
		t.Fatal("accept failed")
	}
	t.Cleanup(func() {
		server.Close()
		client.Close()
	})
	return server, client
}
