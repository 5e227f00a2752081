package netaccept

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// Suspend closes the connections open when it refused new ones and
// returns once they are gone, late ones too; one that never goes ends it
// with its context's error, counting it.
func TestSuspendClosesAndWaitsForTheOpenConnections(t *testing.T) {
	for _, tc := range []struct {
		name    string
		conns   int
		late    int // of them, closed 30 ms after closeConn
		stuck   int // of them, never closed
		wantErr string
	}{
		{name: "none open"},
		{name: "every connection goes at once", conns: 3},
		{name: "a connection goes late", conns: 3, late: 1},
		{name: "a connection never goes", conns: 3, stuck: 1, wantErr: "1 connections still open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			set := map[int]bool{}
			for i := range tc.conns {
				set[i] = true
			}
			refused := false
			var closed []int
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := Suspend(ctx, &mu, func() []int {
				refused = true
				var ids []int
				for id := range set {
					ids = append(ids, id)
				}
				return ids
			}, func(id int) {
				closed = append(closed, id)
				switch {
				case id < tc.stuck:
				case id < tc.stuck+tc.late:
					time.AfterFunc(30*time.Millisecond, func() {
						mu.Lock()
						delete(set, id)
						mu.Unlock()
					})
				default:
					mu.Lock()
					delete(set, id)
					mu.Unlock()
				}
			}, func(id int) bool { return set[id] })
			if !refused || len(closed) != tc.conns {
				t.Fatalf("refused %v, closed %v; want refused and all %d closed", refused, closed, tc.conns)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Suspend = %v, want nil", err)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(set) != 0 {
					t.Fatalf("Suspend returned with %d connections open", len(set))
				}
				return
			}
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Suspend = %v, want %q and the context's deadline", err, tc.wantErr)
			}
		})
	}
}
