package transport

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A request's context on the serving node makes no context (and so no
// timer) while nobody watches it, and behaves as the context.WithDeadline
// it stands for once someone does: its deadline, its cancel (before or
// after the first Done), its parent's end, and what is derived from it.
func TestRequestContextWaitsForAWatcher(t *testing.T) {
	made := func(r *requestCtx) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.ctx != nil
	}
	cases := []struct {
		name string
		run  func(t *testing.T, parent context.Context, cancelParent context.CancelFunc)
	}{
		{"unwatched, then past its deadline", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			dl := time.Now().Add(30 * time.Millisecond)
			r, cancel := newRequestCtx(parent, dl)
			defer cancel()
			if got, ok := r.Deadline(); !ok || !got.Equal(dl) {
				t.Errorf("Deadline() = %v, %v; want %v", got, ok, dl)
			}
			if err := r.Err(); err != nil || r.Value(withinKey{}) != nil || made(r) {
				t.Fatalf("Err() = %v, made %v: want nil and nothing made", err, made(r))
			}
			time.Sleep(40 * time.Millisecond)
			if err := r.Err(); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Err() past the deadline = %v", err)
			}
			select {
			case <-r.Done():
			case <-time.After(time.Second):
				t.Errorf("Done() not closed past the deadline")
			}
		}},
		{"watched, then its deadline", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			r, cancel := newRequestCtx(parent, time.Now().Add(30*time.Millisecond))
			defer cancel()
			fired := make(chan struct{})
			context.AfterFunc(r, func() { close(fired) })
			if !made(r) {
				t.Errorf("AfterFunc did not make the context")
			}
			select {
			case <-fired:
			case <-time.After(time.Second):
				t.Fatalf("AfterFunc not run at the deadline")
			}
			if err := r.Err(); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Err() = %v", err)
			}
		}},
		{"cancelled before anyone watched", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			r, cancel := newRequestCtx(parent, time.Time{})
			cancel()
			if err := r.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("Err() = %v, want Canceled", err)
			}
			select {
			case <-r.Done():
			default:
				t.Errorf("Done() open after cancel")
			}
		}},
		{"cancelled, then past its deadline before anyone watched", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			r, cancel := newRequestCtx(parent, time.Now().Add(10*time.Millisecond))
			cancel()
			time.Sleep(20 * time.Millisecond)
			if err := r.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("Err() = %v, want Canceled (it came first)", err)
			}
			if err := context.Cause(r); !errors.Is(err, context.Canceled) {
				t.Errorf("Cause() = %v, want Canceled", err)
			}
		}},
		{"past its deadline, its cause asked first", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			r, cancel := newRequestCtx(parent, time.Now().Add(10*time.Millisecond))
			defer cancel()
			time.Sleep(20 * time.Millisecond)
			if err := context.Cause(r); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Cause() = %v, want DeadlineExceeded", err)
			}
		}},
		{"cancelled while watched, through a derived context", func(t *testing.T, parent context.Context, _ context.CancelFunc) {
			r, cancel := newRequestCtx(parent, time.Now().Add(time.Hour))
			child, stop := context.WithCancel(r)
			defer stop()
			cancel()
			select {
			case <-child.Done():
			case <-time.After(time.Second):
				t.Fatalf("a derived context did not end with the cancel")
			}
		}},
		{"its parent ends", func(t *testing.T, parent context.Context, cancelParent context.CancelFunc) {
			r, cancel := newRequestCtx(parent, time.Now().Add(time.Hour))
			defer cancel()
			cancelParent()
			if err := r.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("Err() = %v, want Canceled", err)
			}
			<-r.Done()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			tc.run(t, parent, cancel)
		})
	}
}
