package netaccept

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// suspendPoll is how often Suspend checks whether the connections it
// closed are gone.
const suspendPoll = 10 * time.Millisecond

// Suspend is the body of a protocol server's Suspend: under mu (the lock
// of the server's connection set) refuse marks the server as taking no new
// connection and returns those open then; Suspend closes each of them with
// closeConn, under no lock, and returns once open (called under mu) reports
// none of them still in the set, checking every 10 ms, or, when ctx ends
// first, ctx's error counting the connections left.
func Suspend[C any](ctx context.Context, mu sync.Locker, refuse func() []C, closeConn func(C), open func(C) bool) error {
	mu.Lock()
	conns := refuse()
	mu.Unlock()
	for _, c := range conns {
		closeConn(c)
	}
	for {
		mu.Lock()
		left := 0
		for _, c := range conns {
			if open(c) {
				left++
			}
		}
		mu.Unlock()
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d connections still open: %w", left, ctx.Err())
		case <-time.After(suspendPoll):
		}
	}
}
