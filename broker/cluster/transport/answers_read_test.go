package transport

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// A link's reader runs OnAnswersRead's function once the answers it read
// are handed over, before it waits for the peer: what the done callbacks
// left for it is done with no later traffic, and never before their
// answers came. So on the call lane and on the data stream of a peer
// without lanes (an older node).
func TestOnAnswersReadRunsAfterTheAnswersReadBeforeTheReaderWaits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		addr     func(t *testing.T, b *GRPCNetwork) string
		laneless bool
	}{
		{"call lane", func(_ *testing.T, b *GRPCNetwork) string { return b.Addr().String() }, false},
		{"peer without lanes", func(t *testing.T, b *GRPCNetwork) string { return olderNode(t, b, nil) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := grpcNet(t, "a", nil), grpcNet(t, "b", nil)
			must(t, a.SetAddress("b", tc.addr(t, b)))
			b.HandleOrdered("echo", func(_ context.Context, _ string, req []byte, answer func([]byte, error)) error {
				answer(req, nil)
				return nil
			})
			var mu sync.Mutex
			handed, seen := 0, 0
			stop := a.OnAnswersRead(func() {
				mu.Lock()
				defer mu.Unlock()
				seen = handed
			})
			const n = 50
			for i := range n {
				err := a.Send(context.Background(), "b", "echo", []byte{byte(i)}, func(_ []byte, err error) {
					if err != nil {
						t.Errorf("call %d: %v", i, err)
					}
					mu.Lock()
					handed++
					mu.Unlock()
				})
				must(t, err)
			}
			eventually.True(t, 10*time.Second, "the function ran after the last answer was handed over", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return seen == n
			})
			p, err := a.peer("b")
			must(t, err)
			if got := p.laneless.Load() != nil; got != tc.laneless {
				t.Fatalf("calls on a peer's data stream (no lanes): %v, want %v", got, tc.laneless)
			}

			// stop removes the function, and only its own.
			ran := false
			stopOther := a.OnAnswersRead(func() {
				mu.Lock()
				ran = true
				mu.Unlock()
			})
			stop()
			must(t, a.Send(context.Background(), "b", "echo", []byte{0}, func([]byte, error) {}))
			eventually.True(t, 10*time.Second, "the function that replaced it ran", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return ran
			})
			stopOther()
		})
	}
}
