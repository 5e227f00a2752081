package stream_test

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/store/streamlog"
	"github.com/warrenmq/warren/broker/stream/client"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// Benchmarks of the stream protocol path, reported as msg/s (12-byte
// messages). The *Client variants use the official Go client on both
// ends; the *Raw variants drive the socket with the codec, measuring the
// server rather than the client. Run with:
//
//	go test -run '^$' -bench . -benchtime 2000000x ./broker/stream/

var body12 = []byte("0123456789ab")

// clientBuffer is the socket buffer size given to the Go client in
// benchmarks (its default, 8 KiB, caps loopback throughput).
var clientBuffer = flag.Int("client-buffer", 1<<20, "Go client socket buffer bytes in benchmarks (0: client default)")

func benchNode(b *testing.B) (*brokertest.Node, *stream.Environment) {
	b.Helper()
	n := brokertest.Start(b)
	opts := stream.NewEnvironmentOptions().SetUri(n.StreamURI())
	if *clientBuffer > 0 {
		opts = opts.SetReadBuffer(*clientBuffer).SetWriteBuffer(*clientBuffer)
	}
	e, err := stream.NewEnvironment(opts)
	must(b, err)
	b.Cleanup(func() { _ = e.Close() })
	must(b, e.DeclareStream("bench", nil))
	return n, e
}

// BenchmarkPublishConfirmClient: one Go client producer, confirms awaited.
func BenchmarkPublishConfirmClient(b *testing.B) {
	_, e := benchNode(b)
	p, err := e.NewProducer("bench", stream.NewProducerOptions().SetBatchSize(1000).SetQueueSize(100000))
	must(b, err)
	confirms := p.NotifyPublishConfirmation()
	done := make(chan struct{})
	go func() {
		got := 0
		for cs := range confirms {
			got += len(cs)
			if got >= b.N {
				close(done)
				return
			}
		}
	}()
	msg := amqp.NewMessage(body12)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := p.Send(msg); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}

// BenchmarkPublishConfirmRaw: one publisher sending frames of 500
// messages with up to 100,000 unconfirmed, as fast as confirms allow.
func BenchmarkPublishConfirmRaw(b *testing.B) {
	n, _ := benchNode(b)
	r := dialRaw(b, n)
	r.open()
	if code(r.call(&proto.DeclarePublisher{CorrelationID: 9, PublisherID: 1, Stream: "bench"})) != proto.CodeOK {
		b.Fatal("declare publisher")
	}
	enc, _ := amqp.NewMessage(body12).MarshalBinary()
	entry := proto.SimpleEntry(enc)
	const perFrame, window = 500, 100000
	confirmed := make(chan int, 1024)
	go func() {
		for {
			body, err := proto.ReadFrame(r.br, nil, 0)
			if err != nil {
				close(confirmed)
				return
			}
			if k, _, _ := proto.Header(body); k == proto.KeyPublishConfirm {
				confirmed <- int(binary.BigEndian.Uint32(body[5:9]))
			}
		}
	}()
	var frame []byte
	b.ResetTimer()
	start := time.Now()
	sent, acked := 0, 0
	for acked < b.N {
		for sent < b.N && sent-acked < window {
			k := min(perFrame, b.N-sent)
			frame = frame[:0]
			frame = append(frame, 0, 0, 0, 0, 0, byte(proto.KeyPublish), 0, 1, 1)
			frame = binary.BigEndian.AppendUint32(frame, uint32(k))
			for i := range k {
				frame = binary.BigEndian.AppendUint64(frame, uint64(sent+i+1))
				frame = append(frame, entry...)
			}
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			r.write(frame)
			sent += k
		}
		c, ok := <-confirmed
		if !ok {
			b.Fatal("connection closed")
		}
		acked += c
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}

// fill appends total 12-byte messages in chunks of perChunk straight to
// the stream's log (what warren-perf stream fill does over the protocol).
func fill(b *testing.B, n *brokertest.Node, total, perChunk int) {
	b.Helper()
	vh, _ := n.Vhost("/")
	q, err := vh.Queue(b.Context(), "bench", 0)
	must(b, err)
	log := q.(*queue.Stream).Log()
	enc, _ := amqp.NewMessage(body12).MarshalBinary()
	batch := streamlog.NewBatch()
	done := make(chan error, 1)
	for sent := 0; sent < total; {
		batch.Reset()
		k := min(perChunk, total-sent)
		for range k {
			must(b, batch.AddSimple(enc))
		}
		sent += k
		var cb streamlog.DoneFunc
		if sent == total {
			cb = func(_ uint64, err error) { done <- err }
		}
		if _, err := log.Append(batch, cb); err != nil {
			b.Fatal(err)
		}
	}
	must(b, <-done)
}

// BenchmarkConsumeClient: the Go client consumes 300-message chunks.
func BenchmarkConsumeClient(b *testing.B) {
	n, e := benchNode(b)
	fill(b, n, b.N, 300)
	done := make(chan struct{})
	got := 0
	b.ResetTimer()
	start := time.Now()
	c, err := e.NewConsumer("bench", func(stream.ConsumerContext, *amqp.Message) {
		if got++; got == b.N {
			close(done)
		}
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	must(b, err)
	defer c.Close()
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}

// BenchmarkConsumeRaw: a codec-level consumer (broker/stream/client)
// reading 12-byte messages in chunks of 300 and of 1 message, with the
// vhost's read-ahead on and off; 1000 initial credits, granted back in
// batches of 500.
func BenchmarkConsumeRaw(b *testing.B) {
	for _, perChunk := range []int{300, 1} {
		for _, readAhead := range []bool{true, false} {
			b.Run(fmt.Sprintf("chunk=%d/read-ahead=%v", perChunk, readAhead), func(b *testing.B) {
				n, _ := benchNode(b)
				fill(b, n, b.N, perChunk)
				vh, _ := n.Vhost("/")
				vh.StreamReadAhead().Set(readAhead, 4096)
				var got atomic.Int64
				done := make(chan struct{})
				var conn *client.Conn
				pending := 0
				conn, err := client.Dial(context.Background(), n.StreamURI(), client.Options{
					SocketBuffer: *clientBuffer,
					OnDeliver: func(_ uint8, chunk []byte) {
						info, _ := client.ParseChunk(chunk)
						if got.Add(int64(info.NumRecords)) >= int64(b.N) {
							close(done)
						}
						if pending++; pending == 500 {
							_ = conn.Credit(1, 500)
							pending = 0
						}
					},
				})
				must(b, err)
				defer conn.Close()
				b.ResetTimer()
				start := time.Now()
				must(b, conn.Subscribe(context.Background(), 1, "bench", proto.OffsetSpec{Type: proto.OffsetFirst}, 1000, nil))
				<-done
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
			})
		}
	}
}
