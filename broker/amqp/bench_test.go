package amqp_test

import (
	"context"
	"strconv"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
)

// BenchmarkConfirmRoundTrip is PerfTest's s12 in-process: one publisher with
// at most one unconfirmed 100-byte message, one consumer acking each
// delivery. ns/op is one publish-to-confirm round trip.
func BenchmarkConfirmRoundTrip(b *testing.B) {
	n := brokertest.Start(b)
	pub := n.Channel(b)
	sub := n.Channel(b)
	q, err := pub.QueueDeclare("", false, true, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	msgs, err := sub.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for m := range msgs {
			_ = m.Ack(false)
		}
	}()
	body := make([]byte, 100)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, "", q.Name, false, false, amqp091.Publishing{Body: body})
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			b.Fatalf("confirm: %v %v", ok, err)
		}
	}
}

// BenchmarkPrefetchThroughput is PerfTest's s8–s11: one unthrottled
// publisher and one consumer with a prefetch, acking each delivery. ns/op
// is per message consumed.
func BenchmarkPrefetchThroughput(b *testing.B) {
	for _, prefetch := range []int{100, 1000} {
		b.Run("qos="+strconv.Itoa(prefetch), func(b *testing.B) {
			n := brokertest.Start(b)
			pub := n.Channel(b)
			sub := n.Channel(b)
			q, err := pub.QueueDeclare("", false, true, false, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := sub.Qos(prefetch, 0, false); err != nil {
				b.Fatal(err)
			}
			msgs, err := sub.Consume(q.Name, "", false, false, false, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				body := make([]byte, 12)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := pub.PublishWithContext(context.Background(), "", q.Name, false, false, amqp091.Publishing{Body: body}); err != nil {
						return
					}
				}
			}()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := <-msgs
				_ = m.Ack(false)
			}
		})
	}
}
