package queue

import (
	"context"
	"sync"
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
	flushes   atomic.Int64
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
func (c *creditConsumer) Flush()      { c.flushes.Add(1) }

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

// openWakeStream opens a stream holding n one-byte messages.
func openWakeStream(t *testing.T, n int) *Stream {
	t.Helper()
	ctx := context.Background()
	s, err := OpenStream(ctx, StreamConfig{Info: Info{Name: "wake", Durable: true}, Dir: t.TempDir(), ReadAhead: streamlog.NewReadAhead(true, 4096)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	enc := amqp10.AppendFromAMQP091(nil, &wire.Properties{DeliveryMode: 2}, "", "wake", []byte("m"))
	done := make(chan struct{})
	batch := streamlog.NewBatch()
	for i := 0; i < n; i++ {
		batch.AddSimple(enc)
	}
	if _, err := s.Log().Append(batch, func(uint64, error) { close(done) }); err != nil {
		t.Fatal(err)
	}
	<-done
	return s
}

// A consumer waiting for credit gets what is ready from the goroutine that
// calls Wake, before Wake returns, and its output is flushed: an ack's
// credit goes out again without a hand-off to the consumer's goroutine.
func TestStreamWakeDeliversOnTheCallersGoroutine(t *testing.T) {
	s := openWakeStream(t, 10)
	c := &creditConsumer{}
	c.credit.Store(1)
	if err := s.Consume(context.Background(), c, ConsumeOptions{Prefetch: 1, Args: map[string]any{"x-stream-offset": "first"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the consumer to run out of credit", func() bool { return c.delivered.Load() == 1 && c.attempts.Load() == 2 })
	s.amqp.mu.Lock()
	sc := s.amqp.consumers[c]
	s.amqp.mu.Unlock()
	// The goroutine lets go of the reader before it waits for credit.
	waitFor(t, "the consumer's goroutine to wait", func() bool {
		if !sc.mu.TryLock() {
			return false
		}
		sc.mu.Unlock()
		return true
	})

	flushes := c.flushes.Load()
	c.credit.Store(3)
	s.Wake(c)
	if got := c.delivered.Load(); got != 4 {
		t.Fatalf("after Wake returned: %d delivered, want 4", got)
	}
	if c.flushes.Load() == flushes {
		t.Fatal("Wake delivered without flushing the consumer")
	}

	// With credit for everything the rest goes out; the goroutine then waits
	// at the tail, and a new chunk reaches the consumer from there.
	c.credit.Store(100)
	s.Wake(c)
	if got := c.delivered.Load(); got != 10 {
		t.Fatalf("after the second Wake: %d delivered, want 10", got)
	}
	enc := amqp10.AppendFromAMQP091(nil, &wire.Properties{DeliveryMode: 2}, "", "wake", []byte("n"))
	batch := streamlog.NewBatch()
	batch.AddSimple(enc)
	if _, err := s.Log().Append(batch, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message appended after the tail", func() bool { return c.delivered.Load() == 11 })
}

// Credit coming back to one consumer of a stream wakes that consumer's
// goroutine and no other; Wake(nil) wakes them all.
func TestStreamWakeWakesOnlyTheCreditedConsumer(t *testing.T) {
	ctx := context.Background()
	s := openWakeStream(t, 10)
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

// seqConsumer records the offsets it is given; with batch set it takes
// them through DeliverEach (BatchConsumer), else through Deliver.
type seqConsumer struct {
	creditConsumer
	mu   sync.Mutex
	seqs []uint64
}

func (c *seqConsumer) Deliver(d Delivery) bool {
	if !c.creditConsumer.Deliver(d) {
		return false
	}
	c.mu.Lock()
	c.seqs = append(c.seqs, d.Seq)
	c.mu.Unlock()
	return true
}

func (c *seqConsumer) give(n int32) { c.credit.Add(n) }

func (c *seqConsumer) offsets() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.seqs...)
}

type batchSeqConsumer struct{ seqConsumer }

func (c *batchSeqConsumer) DeliverEach(next func() *Delivery) bool {
	for {
		if c.credit.Add(-1) < 0 {
			c.credit.Add(1)
			return true
		}
		d := next()
		if d == nil {
			c.credit.Add(1)
			return false
		}
		c.mu.Lock()
		c.seqs = append(c.seqs, d.Seq)
		c.mu.Unlock()
		c.creditConsumer.delivered.Add(1)
	}
}

// Whether a consumer takes deliveries one by one or in runs, it gets every
// offset once and in order, across stops for credit and at the tail.
func TestStreamDeliversEveryOffsetOnceAcrossCreditStops(t *testing.T) {
	type recorder interface {
		Consumer
		offsets() []uint64
		give(n int32)
	}
	tests := []struct {
		name string
		c    recorder
	}{
		{"Deliver", &seqConsumer{}},
		{"DeliverEach", &batchSeqConsumer{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openWakeStream(t, 1000)
			tt.c.give(7)
			if err := s.Consume(context.Background(), tt.c, ConsumeOptions{Prefetch: 7, Args: map[string]any{"x-stream-offset": "first"}}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the first 7", func() bool { return len(tt.c.offsets()) == 7 })
			for got := 7; got < 1000; got = len(tt.c.offsets()) {
				tt.c.give(int32(min(13, 1000-got)))
				s.Wake(tt.c)
				want := min(got+13, 1000)
				waitFor(t, "the next run", func() bool { return len(tt.c.offsets()) == want })
			}
			time.Sleep(20 * time.Millisecond)
			seqs := tt.c.offsets()
			if len(seqs) != 1000 {
				t.Fatalf("%d delivered, want 1000", len(seqs))
			}
			for i, seq := range seqs {
				if seq != uint64(i) {
					t.Fatalf("delivery %d has offset %d", i, seq)
				}
			}
		})
	}
}
