package queue

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/amqp10"
	"github.com/warrenmq/warren/broker/store/streamlog"
)

// frameConsumer does a channel's per-delivery work (basic.deliver, content
// header and body frames into an output buffer, reset when large) and
// signals after n deliveries.
type frameConsumer struct {
	out  []byte
	m    wire.BasicDeliver // reused, as a channel does
	tag  uint64
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (c *frameConsumer) Deliver(d Delivery) bool {
	c.tag++
	c.m = wire.BasicDeliver{ConsumerTag: "ctag", DeliveryTag: c.tag, Exchange: d.Msg.Exchange, RoutingKey: d.Msg.RoutingKey}
	b := wire.AppendMethodFrame(c.out, 1, &c.m)
	b = wire.AppendHeaderFrame(b, 1, wire.ClassBasic, uint64(len(d.Msg.Body)), d.Msg.Props)
	b = wire.AppendBodyFrames(b, 1, d.Msg.Body, 131072)
	if len(b) > 64<<10 {
		b = b[:0]
	}
	c.out = b
	if c.n.Add(1) == c.want {
		close(c.done)
	}
	return true
}

func (c *frameConsumer) NoAck() bool { return false }
func (c *frameConsumer) Cancelled()  {}
func (c *frameConsumer) Flush()      {}

// BenchmarkStreamAMQPConsume1MsgChunks is the AMQP stream consumer's
// server-side path (read, decode AMQP 1.0, encode AMQP 0.9.1 frames) over
// chunks of one 12-byte message, with read-ahead on and off. Sockets and
// the client are not included.
func BenchmarkStreamAMQPConsume1MsgChunks(b *testing.B) {
	const chunks = 100_000
	dir := b.TempDir()
	ra := streamlog.NewReadAhead(true, 4096)
	s, err := OpenStream(context.Background(), StreamConfig{Info: Info{Name: "bench", Durable: true}, Dir: dir, ReadAhead: ra})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
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
		if _, err := s.Log().Append(batch, fn); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("read-ahead=%v", on), func(b *testing.B) {
			ra.Set(on, 4096)
			b.ReportAllocs()
			total := 0
			b.ResetTimer()
			for total < b.N {
				n := min(b.N-total, chunks)
				c := &frameConsumer{want: int64(n), done: make(chan struct{})}
				if err := s.Consume(context.Background(), c, ConsumeOptions{Prefetch: 1000, Args: map[string]any{"x-stream-offset": "first"}}); err != nil {
					b.Fatal(err)
				}
				<-c.done
				s.Cancel(c)
				total += n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}
