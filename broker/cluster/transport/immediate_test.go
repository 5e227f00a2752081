package transport

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// An Immediate Send returns at once even while the peer's connection is
// being made (a listener that accepts and never answers the HTTP/2
// handshake, as a black-holed or restarting peer looks), where opening a
// stream waits up to the connect timeout; its done gets the failure
// later, once. (Found in review: the Send waited 2 s for the stream.)
func TestImmediateSendDoesNotWaitForTheStream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accept, never speak
		}
	}()
	a := grpcNet(t, "a", nil)
	must(t, a.SetAddress("b", ln.Addr().String()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answers := make(answerCh, 2)
	start := time.Now()
	for range 2 {
		if err := a.Send(Immediate(ctx), "b", "m", []byte("x"), answers.put); err != nil {
			t.Fatalf("Immediate Send: %v", err)
		}
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("two Immediate Sends took %v (waited for the peer's stream)", d)
	}
	for range 2 {
		select {
		case r := <-answers:
			if status.Code(r.err) != codes.Unavailable {
				t.Fatalf("a call to a peer that never answers: %q, %v; want Unavailable", r.resp, r.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no answer within 20 s")
		}
	}
}
