package netaccept

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestServeHandsOverConnectionsAndStopsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan net.Conn, 2)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, "test", func(nc net.Conn) { got <- nc }) }()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		select {
		case nc := <-got:
			nc.Close()
		case <-time.After(5 * time.Second):
			t.Fatalf("connection %d not handed over", i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the context ended")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("listener still accepts after Serve returned")
	}
}
