package queue

import (
	"context"
	"fmt"
	"testing"
)

func TestPublishInlineDeliversAndConfirmsBeforeReturning(t *testing.T) {
	tests := []struct {
		name    string
		durable bool
	}{
		{"durable queue, transient message", true},
		{"transient queue", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := open(t, t.TempDir(), Info{Name: "q", Durable: tt.durable}, nil, 100)
			c := consumeIdle(t, f.q)
			conf := &confirms{ack: map[uint64]bool{}}
			// The queue is idle: the publish runs on this goroutine.
			f.q.PublishInline([]Publish{{Msg: f.msg("a", false), Confirm: conf, Tag: 7}}, nil)
			c.mu.Lock()
			got := len(c.got)
			c.mu.Unlock()
			if got != 1 {
				t.Fatalf("deliveries when PublishInline returned: %d, want 1", got)
			}
			conf.mu.Lock()
			ok, confirmed := conf.ack[7]
			conf.mu.Unlock()
			if !confirmed || !ok {
				t.Fatalf("confirm when PublishInline returned: %v (given: %v), want an ack", ok, confirmed)
			}
		})
	}
}

// enqueued is where a publisher's confirms given at enqueue go out: after
// the message is in the queue, before it is delivered.
func TestPublishInlineCallsEnqueuedBetweenEnqueueAndDelivery(t *testing.T) {
	f := open(t, t.TempDir(), Info{Name: "q", Durable: true}, nil, 100)
	c := consumeIdle(t, f.q)
	calls, deliveredBefore := 0, -1
	f.q.PublishInline([]Publish{{Msg: f.msg("a", false)}}, func() {
		calls++
		c.mu.Lock()
		deliveredBefore = len(c.got)
		c.mu.Unlock()
	})
	c.mu.Lock()
	deliveredAfter := len(c.got)
	c.mu.Unlock()
	if calls != 1 || deliveredBefore != 0 || deliveredAfter != 1 {
		t.Fatalf("enqueued called %d times with %d deliveries made, %d after PublishInline; want once, 0, 1", calls, deliveredBefore, deliveredAfter)
	}
}

// When the turn does not run inline, enqueued is called once the batch is
// in the inbox: a Get from then on finds it.
func TestPublishInlineCallsEnqueuedOncePosted(t *testing.T) {
	f := open(t, t.TempDir(), Info{Name: "q"}, nil, 100)
	calls := 0
	var got []string
	f.q.PublishInline([]Publish{{Msg: f.msg("a", false)}, {Msg: f.msg("b", false)}}, func() {
		calls++
		for range 2 {
			d, ok, err := f.q.Get(context.Background(), true)
			if err != nil || !ok {
				t.Errorf("Get after enqueued: ok %v, err %v", ok, err)
				return
			}
			got = append(got, string(d.Msg.Body))
		}
	})
	if calls != 1 || fmt.Sprint(got) != "[a b]" {
		t.Fatalf("enqueued called %d times, got %v; want once, [a b]", calls, got)
	}
}

// A publisher may hand its batches over either way; the queue keeps them
// in the order they were handed over.
func TestPublishInlineKeepsOrderWithPublish(t *testing.T) {
	tests := []struct {
		name    string
		inline  func(i int) bool
		batchOf func(i int) int
	}{
		{"inline only", func(int) bool { return true }, func(int) int { return 1 }},
		{"alternating", func(i int) bool { return i%2 == 0 }, func(int) int { return 1 }},
		{"mixed batch sizes", func(i int) bool { return i%3 != 0 }, func(i int) int { return 1 + i%3 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := open(t, t.TempDir(), Info{Name: "q"}, nil, 4096)
			c := newConsumer(-1, true)
			if err := f.q.Consume(context.Background(), c, ConsumeOptions{}); err != nil {
				t.Fatal(err)
			}
			const total = 3000
			for i, n := 0, 0; n < total; i++ {
				var batch []Publish
				for k := 0; k < tt.batchOf(i) && n < total; k++ {
					batch = append(batch, Publish{Msg: f.msg(fmt.Sprint(n), false)})
					n++
				}
				if tt.inline(i) {
					f.q.PublishInline(batch, nil)
				} else {
					f.q.Publish(batch)
				}
			}
			got := c.wait(t, total)
			for i, d := range got {
				if string(d.Msg.Body) != fmt.Sprint(i) {
					t.Fatalf("delivery %d is message %q", i, d.Msg.Body)
				}
			}
		})
	}
}

// consumeIdle adds a consumer to q and returns once q is idle, so that a
// PublishInline made next runs its turn on the caller's goroutine.
// Consume's answer is sent during the queue's turn, which goes on
// (delivering, refilling, publishing its stats) holding turnMu: a
// PublishInline made at once may find that turn under way and hand its
// message to the queue's goroutine, as documented. Nothing else is posted
// to q, so once that turn has ended the queue's goroutine waits.
func consumeIdle(t *testing.T, q *Classic) *testConsumer {
	t.Helper()
	c := newConsumer(-1, false)
	if err := q.Consume(context.Background(), c, ConsumeOptions{}); err != nil {
		t.Fatal(err)
	}
	q.turnMu.Lock() // Consume's turn has ended
	defer q.turnMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.inbox) != 0 {
		t.Fatalf("%d commands posted to the queue besides the consume", len(q.inbox))
	}
	return c
}
