package forward

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// gapWait is how long a publish call waits for an earlier call of its
// sender that has not arrived (lost with a broken connection: the sender
// nacked its messages and starts a new epoch) before it goes ahead.
const gapWait = 2 * time.Second

// orderer hands out turns to the publish calls of each sending node in
// the order of their sequence numbers.
type orderer struct {
	mu    sync.Mutex
	turns map[string]*turn // by sending node
	gap   time.Duration    // gapWait; tests shorten it
}

type turn struct {
	epoch, next uint64
	changed     chan struct{} // closed when next moves
}

// wait blocks until call seq of from's epoch is next (or an earlier one
// is overdue) and returns the function that ends its turn.
func (o *orderer) wait(ctx context.Context, from string, epoch, seq uint64, log *slog.Logger) (func(), error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		o.mu.Lock()
		t := o.turns[from]
		if t == nil || t.epoch != epoch {
			t = &turn{epoch: epoch, changed: make(chan struct{})}
			o.turns[from] = t
		}
		if seq <= t.next {
			o.mu.Unlock()
			return func() { o.done(from, t, seq) }, nil
		}
		ch := t.changed
		o.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(o.gap)
		}
		select {
		case <-ch:
		case <-timer.C:
			log.Warn("forward: an earlier publish call from a node did not arrive; going ahead", "from", from, "waiting_for", t.next, "call", seq)
			o.mu.Lock()
			if t.next < seq {
				t.next = seq
				close(t.changed)
				t.changed = make(chan struct{})
			}
			o.mu.Unlock()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (o *orderer) done(from string, t *turn, seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if seq >= t.next {
		t.next = seq + 1
		close(t.changed)
		t.changed = make(chan struct{})
	}
}
