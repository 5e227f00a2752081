package queue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/amqp10"
	"github.com/warrenmq/warren/broker/store/streamlog"
)

// creditConsumer takes deliveries while it has credit and counts every
// attempt, refused ones included.
type creditConsumer struct {
	credit    atomic.Int32
	attempts  atomic.Int64
	delivered atomic.Int64
}

func (c *creditConsumer) Deliver(Delivery) bool {
	c.attempts.Add(1)
	if c.credit.Add(-1) < 0 {
		c.credit.Add(1)
		return false
	}
	c.delivered.Add(1)
	return true
}

func (c *creditConsumer) NoAck() bool { return false }
func (c *creditConsumer) Cancelled()  {}
func (c *creditConsumer) Flush()      {}

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Credit coming back to one consumer of a stream wakes that consumer's
// goroutine and no other; Wake(nil) wakes them all.
func TestStreamWakeWakesOnlyTheCreditedConsumer(t *testing.T) {
	ctx := context.Background()
	s, err := OpenStream(ctx, StreamConfig{Info: Info{Name: "wake", Durable: true}, Dir: t.TempDir(), ReadAhead: streamlog.NewReadAhead(true, 4096)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	enc := amqp10.AppendFromAMQP091(nil, &wire.Properties{DeliveryMode: 2}, "", "wake", []byte("m"))
	done := make(chan struct{})
	batch := streamlog.NewBatch()
	for i := 0; i < 10; i++ {
		batch.AddSimple(enc)
	}
	if _, err := s.Log().Append(batch, func(uint64, error) { close(done) }); err != nil {
		t.Fatal(err)
	}
	<-done

	a, b := &creditConsumer{}, &creditConsumer{}
	for _, c := range []*creditConsumer{a, b} {
		c.credit.Store(1)
		if err := s.Consume(ctx, c, ConsumeOptions{Prefetch: 1, Args: map[string]any{"x-stream-offset": "first"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Each takes its one message and is refused the next: both wait.
	waitFor(t, "both consumers to run out of credit", func() bool {
		return a.delivered.Load() == 1 && a.attempts.Load() == 2 && b.delivered.Load() == 1 && b.attempts.Load() == 2
	})

	a.credit.Store(1)
	s.Wake(a)
	// One more delivery and one more refusal: it waits again.
	waitFor(t, "the woken consumer's delivery", func() bool { return a.delivered.Load() == 2 && a.attempts.Load() == 4 })
	time.Sleep(50 * time.Millisecond)
	if got := b.attempts.Load(); got != 2 {
		t.Fatalf("the other consumer tried %d times, want 2: it was woken", got)
	}

	b.credit.Store(1)
	s.Wake(nil)
	waitFor(t, "both consumers after Wake(nil)", func() bool {
		return b.delivered.Load() == 2 && b.attempts.Load() == 4 && a.attempts.Load() == 5
	})
}
