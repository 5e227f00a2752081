package stream_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
)

// sendIDs publishes messages "d-<id>" with explicit publishing ids from a
// named producer and waits until each is confirmed.
func sendIDs(t *testing.T, e *stream.Environment, name string, from, to int64) {
	t.Helper()
	p, err := e.NewProducer("dedup", stream.NewProducerOptions().SetProducerName(name))
	must(t, err)
	defer p.Close()
	confirms := p.NotifyPublishConfirmation()
	var batch []message.StreamMessage
	for id := from; id <= to; id++ {
		m := amqp.NewMessage(fmt.Appendf(nil, "d-%d", id))
		m.SetPublishingId(id)
		batch = append(batch, m)
	}
	must(t, p.BatchSend(batch))
	want := int(to - from + 1)
	for got := 0; got < want; {
		select {
		case cs := <-confirms:
			for _, c := range cs {
				if !c.IsConfirmed() {
					t.Fatalf("publishing id %d not confirmed: %v", c.GetPublishingId(), c.GetError())
				}
			}
			got += len(cs)
		case <-time.After(10 * time.Second):
			t.Fatalf("confirms: got %d of %d", got, want)
		}
	}
}

// TestDeduplication: a named producer that republishes ids at or below its
// last one after reconnecting gets them confirmed but not stored twice.
func TestDeduplication(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("dedup", nil))
	sendIDs(t, e, "p1", 1, 100)
	must(t, e.Close())

	e = env(t, n)
	seq, err := e.QuerySequence("p1", "dedup")
	must(t, err)
	if seq != 100 {
		t.Fatalf("publisher sequence %d, want 100", seq)
	}
	sendIDs(t, e, "p1", 51, 150) // 51..100 are duplicates
	seq, err = e.QuerySequence("p1", "dedup")
	must(t, err)
	if seq != 150 {
		t.Fatalf("publisher sequence %d, want 150", seq)
	}

	n = n.Restart() // the sequence survives a restart (tracking in the log)
	e = env(t, n)
	sendIDs(t, e, "p1", 140, 160)
	col := newCollector()
	c, err := e.NewConsumer("dedup", col.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	must(t, err)
	defer c.Close()
	col.wait(t, 160)
	time.Sleep(200 * time.Millisecond)
	got := col.wait(t, col.count())
	var want []string
	for id := 1; id <= 160; id++ {
		want = append(want, fmt.Sprintf("d-%d", id))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stream holds %d messages, want 160 without duplicates", len(got))
	}
}

// TestStoreQueryOffsetAcrossRestart: stored offsets are tracking records in
// the stream and survive a broker restart.
func TestStoreQueryOffsetAcrossRestart(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("track", nil))
	if _, err := e.QueryOffset("app", "track"); err == nil {
		t.Fatal("query offset before any store succeeded")
	}
	publish(t, e, "track", "m", 100, nil)
	col := newCollector()
	c, err := e.NewConsumer("track", col.handle, stream.NewConsumerOptions().SetConsumerName("app").SetManualCommit().
		SetOffset(stream.OffsetSpecification{}.First()))
	must(t, err)
	col.wait(t, 100)
	must(t, c.StoreCustomOffset(41))
	deadline := time.Now().Add(5 * time.Second)
	for {
		off, err := e.QueryOffset("app", "track")
		if err == nil && off == 41 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("query offset: %d %v, want 41", off, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	must(t, c.Close())
	must(t, e.Close())

	n = n.Restart()
	e = env(t, n)
	off, err := e.QueryOffset("app", "track")
	must(t, err)
	if off != 41 {
		t.Fatalf("offset after restart %d, want 41", off)
	}
	// Resume from the stored offset.
	col = newCollector()
	c, err = e.NewConsumer("track", col.handle, stream.NewConsumerOptions().SetConsumerName("app").SetManualCommit().
		SetOffset(stream.OffsetSpecification{}.Offset(off)))
	must(t, err)
	defer c.Close()
	got := col.wait(t, 58)
	if got[0] != "m-42" && got[0] != "m-41" {
		t.Fatalf("resumed at %q", got[0])
	}
}
