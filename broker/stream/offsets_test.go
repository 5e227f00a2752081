package stream_test

import (
	"slices"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
)

// TestOffsetSpecifications subscribes with every offset specification.
func TestOffsetSpecifications(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("s", nil))
	publish(t, e, "s", "a", 500, nil)
	time.Sleep(20 * time.Millisecond)
	mid := time.Now().UnixMilli()
	time.Sleep(20 * time.Millisecond)
	publish(t, e, "s", "b", 500, nil)
	all := append(names("a", 0, 500), names("b", 0, 500)...)

	consume := func(spec stream.OffsetSpecification) *collector {
		col := newCollector()
		c, err := e.NewConsumer("s", col.handle, stream.NewConsumerOptions().SetOffset(spec))
		must(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return col
	}
	t.Run("first", func(t *testing.T) {
		if got := consume(stream.OffsetSpecification{}.First()).wait(t, 1000); !slices.Equal(got, all) {
			t.Fatalf("got %d messages starting %v", len(got), got[:3])
		}
	})
	t.Run("offset", func(t *testing.T) {
		col := consume(stream.OffsetSpecification{}.Offset(742))
		got := col.wait(t, 1000-742)
		if !slices.Equal(got, all[742:]) {
			t.Fatalf("got %d messages starting %v", len(got), got[:3])
		}
		if off := col.firstOffset(); off != 742 {
			t.Fatalf("first offset %d, want 742", off)
		}
	})
	t.Run("timestamp", func(t *testing.T) {
		got := consume(stream.OffsetSpecification{}.Timestamp(mid)).wait(t, 500)
		if !slices.Equal(got, all[500:]) {
			t.Fatalf("got %d messages starting %v", len(got), got[:3])
		}
	})
	t.Run("last", func(t *testing.T) {
		// The last chunk: a suffix of the stream ending with the last message.
		col := consume(stream.OffsetSpecification{}.Last())
		col.wait(t, 1)
		time.Sleep(100 * time.Millisecond)
		got := col.wait(t, col.count())
		if len(got) == 0 || len(got) > 500 || !slices.Equal(got, all[1000-len(got):]) {
			t.Fatalf("last: got %d messages %v", len(got), got)
		}
	})
	t.Run("next", func(t *testing.T) {
		col := consume(stream.OffsetSpecification{}.Next())
		time.Sleep(100 * time.Millisecond)
		if c := col.count(); c != 0 {
			t.Fatalf("next delivered %d old messages", c)
		}
		publish(t, e, "s", "c", 10, nil)
		if got := col.wait(t, 10); !slices.Equal(got, names("c", 0, 10)) {
			t.Fatalf("next: got %v", got)
		}
	})
}

// TestCreditFlow: a consumer with manual credit gets only as many chunks
// as it grants.
func TestCreditFlow(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("credit", nil))
	// Ten chunks: one batch send each, confirmed before the next.
	p, err := e.NewProducer("credit", nil)
	must(t, err)
	confirms := p.NotifyPublishConfirmation()
	for i := range 10 {
		must(t, p.BatchSend([]message.StreamMessage{amqp.NewMessage([]byte{byte(i)})}))
		<-confirms
	}
	must(t, p.Close())
	col := newCollector()
	c, err := e.NewConsumer("credit", col.handle, stream.NewConsumerOptions().
		SetOffset(stream.OffsetSpecification{}.First()).SetInitialCredits(2).SetCreditStrategy(stream.ManualCreditStrategy))
	must(t, err)
	defer c.Close()
	col.wait(t, 2)
	time.Sleep(200 * time.Millisecond)
	if got := col.count(); got != 2 {
		t.Fatalf("with 2 credits got %d chunks", got)
	}
	must(t, c.Credit(3))
	col.wait(t, 5)
	time.Sleep(200 * time.Millisecond)
	if got := col.count(); got != 5 {
		t.Fatalf("with 5 credits got %d chunks", got)
	}
}
