package stream_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
)

// updates records consumer update calls.
type updates struct {
	mu    sync.Mutex
	calls []bool
	spec  stream.OffsetSpecification
}

func (u *updates) fn(_ string, active bool) stream.OffsetSpecification {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, active)
	return u.spec
}

func (u *updates) get() []bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]bool(nil), u.calls...)
}

// TestSingleActiveConsumer: of two consumers with the same name, one is
// active; when it leaves, the other is told (consumer update) and starts
// where its answer says.
func TestSingleActiveConsumer(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("sac", nil))
	publish(t, e, "sac", "m", 100, nil)

	ua := &updates{spec: stream.OffsetSpecification{}.First()}
	ub := &updates{spec: stream.OffsetSpecification{}.Offset(60)}
	ca, cb := newCollector(), newCollector()
	a, err := e.NewConsumer("sac", ca.handle, stream.NewConsumerOptions().SetConsumerName("group").
		SetSingleActiveConsumer(stream.NewSingleActiveConsumer(ua.fn)))
	must(t, err)
	b, err := e.NewConsumer("sac", cb.handle, stream.NewConsumerOptions().SetConsumerName("group").
		SetSingleActiveConsumer(stream.NewSingleActiveConsumer(ub.fn)))
	must(t, err)
	defer b.Close()
	if got := ca.wait(t, 100); !slices.Equal(got, names("m", 0, 100)) {
		t.Fatalf("active consumer got %v...", got[:3])
	}
	time.Sleep(200 * time.Millisecond)
	if cb.count() != 0 || len(ub.get()) != 0 {
		t.Fatalf("inactive consumer got %d messages, updates %v", cb.count(), ub.get())
	}
	if got := ua.get(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("active consumer updates %v", got)
	}
	must(t, a.Close())
	if got := cb.wait(t, 40); !slices.Equal(got, names("m", 60, 100)) {
		t.Fatalf("promoted consumer got %v", got)
	}
	if got := ub.get(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("promoted consumer updates %v", got)
	}
}

// TestSuperStreams: create a super stream, route and list partitions,
// publish with the client's super stream producer (hash and key routing)
// and consume with its super stream consumer, then delete it.
func TestSuperStreams(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareSuperStream("invoices", stream.NewPartitionsOptions(3).SetMaxAge(time.Hour)))
	parts, err := e.QueryPartitions("invoices")
	must(t, err)
	if !slices.Equal(parts, []string{"invoices-0", "invoices-1", "invoices-2"}) {
		t.Fatalf("partitions %v", parts)
	}
	route, err := e.QueryRoute("invoices", "2")
	must(t, err)
	if !slices.Equal(route, []string{"invoices-2"}) {
		t.Fatalf("route of key 2: %v", route)
	}

	key := func(m message.StreamMessage) string { return m.GetApplicationProperties()["key"].(string) }
	p, err := e.NewSuperStreamProducer("invoices", stream.NewSuperStreamProducerOptions(stream.NewHashRoutingStrategy(key)))
	must(t, err)
	confirms := p.NotifyPublishConfirmation(1)
	const total = 300
	for i := range total {
		m := amqp.NewMessage(fmt.Appendf(nil, "inv-%d", i))
		m.ApplicationProperties = map[string]any{"key": fmt.Sprintf("k-%d", i)}
		must(t, p.Send(m))
	}
	perPartition := map[string]int{}
	for got := 0; got < total; {
		select {
		case c := <-confirms:
			for _, cs := range c.ConfirmationStatus {
				if !cs.IsConfirmed() {
					t.Fatalf("not confirmed: %v", cs.GetError())
				}
			}
			perPartition[c.Partition] += len(c.ConfirmationStatus)
			got += len(c.ConfirmationStatus)
		case <-time.After(10 * time.Second):
			t.Fatalf("confirmed %d of %d", got, total)
		}
	}
	must(t, p.Close())
	if len(perPartition) != 3 {
		t.Fatalf("hash routing used partitions %v", perPartition)
	}

	col := newCollector()
	c, err := e.NewSuperStreamConsumer("invoices", col.handle, stream.NewSuperStreamConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	must(t, err)
	got := col.wait(t, total)
	must(t, c.Close())
	slices.Sort(got)
	want := names("inv", 0, total)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("super stream consumer got %d messages", len(got))
	}
	for _, part := range parts {
		st, err := e.StreamStats(part)
		must(t, err)
		if _, err := st.CommittedChunkId(); err != nil {
			t.Fatalf("%s: %v", part, err)
		}
	}

	// Key routing over binding keys.
	must(t, e.DeclareSuperStream("regions", stream.NewBindingsOptions([]string{"eu", "us"})))
	kp, err := e.NewSuperStreamProducer("regions", stream.NewSuperStreamProducerOptions(stream.NewKeyRoutingStrategy(key)))
	must(t, err)
	kconf := kp.NotifyPublishConfirmation(1)
	for i, region := range []string{"eu", "us", "eu"} {
		m := amqp.NewMessage(fmt.Appendf(nil, "%s-%d", region, i))
		m.ApplicationProperties = map[string]any{"key": region}
		must(t, kp.Send(m))
	}
	for got := 0; got < 3; {
		select {
		case c := <-kconf:
			got += len(c.ConfirmationStatus)
		case <-time.After(10 * time.Second):
			t.Fatal("key routing confirms timed out")
		}
	}
	must(t, kp.Close())
	eu := newCollector()
	ec, err := e.NewConsumer("regions-eu", eu.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	must(t, err)
	if got := eu.wait(t, 2); !slices.Equal(got, []string{"eu-0", "eu-2"}) {
		t.Fatalf("regions-eu holds %v", got)
	}
	must(t, ec.Close())

	must(t, e.DeleteSuperStream("invoices"))
	for _, part := range parts {
		if ok, _ := e.StreamExists(part); ok {
			t.Fatalf("partition %s survived its super stream", part)
		}
	}
	if _, err := e.QueryPartitions("invoices"); err == nil {
		t.Fatal("partitions of a deleted super stream")
	}
}

// TestSuperStreamSingleActiveConsumer: two super stream consumers of one
// group share the partitions, each partition active on exactly one.
func TestSuperStreamSingleActiveConsumer(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareSuperStream("orders", stream.NewPartitionsOptions(3)))
	var cols []*collector
	var upd []*updates
	for range 2 {
		col, u := newCollector(), &updates{spec: stream.OffsetSpecification{}.First()}
		c, err := e.NewSuperStreamConsumer("orders", col.handle, stream.NewSuperStreamConsumerOptions().
			SetConsumerName("g").SetSingleActiveConsumer(stream.NewSingleActiveConsumer(u.fn)))
		must(t, err)
		t.Cleanup(func() { _ = c.Close() })
		cols, upd = append(cols, col), append(upd, u)
	}
	time.Sleep(300 * time.Millisecond)
	for _, part := range []string{"orders-0", "orders-1", "orders-2"} {
		publish(t, e, part, part, 10, nil)
	}
	deadline := time.Now().Add(10 * time.Second)
	for cols[0].count()+cols[1].count() < 30 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	a, b := cols[0].count(), cols[1].count()
	if a+b != 30 || a == 0 || b == 0 {
		t.Fatalf("consumers got %d and %d messages, want 30 split over both; updates %v %v", a, b, upd[0].get(), upd[1].get())
	}
}
