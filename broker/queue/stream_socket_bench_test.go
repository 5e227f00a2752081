package queue_test

import (
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/amqp10"
	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/store/streamlog"
)

// BenchmarkStreamAMQPConsumeOverSocket consumes a stream of 1-message
// chunks of 12-byte messages with amqp091-go (prefetch 200, manual acks
// with multiple every 100) over a real socket, read-ahead on and off. The
// stream is filled through its log, one chunk per message, as a stream
// written at a low rate is.
func BenchmarkStreamAMQPConsumeOverSocket(b *testing.B) {
	const chunks = 100_000
	n := brokertest.Start(b)
	ch := n.Channel(b)
	if _, err := ch.QueueDeclare("bench", true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		b.Fatal(err)
	}
	vh, _ := n.Broker.Vhost("/")
	q, err := vh.Queue(b.Context(), "bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	log := q.(*queue.Stream).Log()
	enc := amqp10.AppendFromAMQP091(nil, &wire.Properties{DeliveryMode: 2}, "", "bench", make([]byte, 12))
	batch := streamlog.NewBatch()
	done := make(chan struct{})
	for i := 0; i < chunks; i++ {
		batch.Reset()
		batch.AddSimple(enc)
		var fn streamlog.DoneFunc
		if i == chunks-1 {
			fn = func(uint64, error) { close(done) }
		}
		if _, err := log.Append(batch, fn); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("read-ahead=%v", on), func(b *testing.B) {
			vh.StreamReadAhead().Set(on, 4096)
			c := n.Channel(b)
			c.Qos(200, 0, false)
			b.ResetTimer()
			got := 0
			for got < b.N {
				ds, err := c.Consume("bench", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
				if err != nil {
					b.Fatal(err)
				}
				want := min(b.N-got, chunks)
				for i := 0; i < want; i++ {
					select {
					case d := <-ds:
						if i%100 == 99 || i == want-1 {
							d.Ack(true)
						}
					case <-time.After(30 * time.Second):
						b.Fatalf("stalled at %d", i)
					}
				}
				got += want
				c.Close()
				c = n.Channel(b)
				c.Qos(200, 0, false)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}
