package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/server"
)

func TestDeclarePublishConsume(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("orders", stream.NewStreamOptions().SetMaxLengthBytes(stream.ByteCapacity{}.GB(1)).SetMaxAge(time.Hour)))
	// The environment hides StreamAlreadyExists (raw_test.go checks the code).
	must(t, e.DeclareStream("orders", nil))
	ok, err := e.StreamExists("orders")
	must(t, err)
	if !ok {
		t.Fatal("stream does not exist after declare")
	}
	publish(t, e, "orders", "m", 1000, nil)

	col := newCollector()
	c, err := e.NewConsumer("orders", col.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	must(t, err)
	defer c.Close()
	got := col.wait(t, 1000)
	if !slices.Equal(got[:1000], names("m", 0, 1000)) {
		t.Fatalf("consumed out of order or wrong: first %v", got[:5])
	}

	must(t, e.DeleteStream("orders"))
	ok, err = e.StreamExists("orders")
	must(t, err)
	if ok {
		t.Fatal("stream exists after delete")
	}
	if err := e.DeleteStream("orders"); !errors.Is(err, stream.StreamDoesNotExist) {
		t.Fatalf("delete missing: %v, want StreamDoesNotExist", err)
	}
}

// TestLargeChunks: chunks of every size class reach the consumer intact:
// read ahead (small), read into memory (mid-size) and sent with sendfile
// (512 KiB and more), with read-ahead on and off. The run of large chunks
// at the end spans segments of 1 MB, so the reader leaves segment files
// while several of their chunks are still queued for sendfile.
func TestLargeChunks(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("big", stream.NewStreamOptions().SetMaxSegmentSizeBytes(stream.ByteCapacity{}.MB(1))))
	p, err := e.NewProducer("big", nil)
	must(t, err)
	confirms := p.NotifyPublishConfirmation()
	var want []string
	sizes := []int{10, 3000, 30000, 200000, 10}
	for range 10 {
		sizes = append(sizes, 110000) // 550 KB chunks: sendfile
	}
	for c, size := range sizes {
		var batch []message.StreamMessage
		for i := range 5 {
			body := fmt.Sprintf("%d.%d:", c, i) + strings.Repeat(string(rune('a'+i)), size)
			want = append(want, body)
			batch = append(batch, amqp.NewMessage([]byte(body)))
		}
		must(t, p.BatchSend(batch))
		for got := 0; got < 5; {
			got += len(<-confirms)
		}
	}
	must(t, p.Close())
	for _, readAhead := range []bool{true, false} {
		vh, _ := n.Vhost("/")
		mv, _ := n.Meta().Vhost("/")
		mv.Storage.StreamReadAhead = &readAhead
		vh.UpdateSettings(context.Background(), mv)
		col := newCollector()
		c, err := e.NewConsumer("big", col.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()).SetCRCCheck(true))
		must(t, err)
		got := col.wait(t, len(want))
		must(t, c.Close())
		if !slices.Equal(got, want) {
			t.Fatalf("read-ahead %v: consumed messages differ", readAhead)
		}
	}
}

// TestClientFiltering: the Go client's filtering producer (publish v2) and
// filtering consumer.
func TestClientFiltering(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("regions", nil))
	region := func(m message.StreamMessage) string { return m.GetApplicationProperties()["region"].(string) }
	for _, r := range []string{"eu", "us", "eu"} {
		p, err := e.NewProducer("regions", stream.NewProducerOptions().SetFilter(stream.NewProducerFilter(region)))
		must(t, err)
		confirms := p.NotifyPublishConfirmation()
		for i := range 50 {
			m := amqp.NewMessage([]byte(r + "-" + strings.Repeat("x", i%3)))
			m.ApplicationProperties = map[string]any{"region": r}
			must(t, p.Send(m))
		}
		for got := 0; got < 50; {
			got += len(<-confirms)
		}
		must(t, p.Close())
	}
	col := newCollector()
	post := func(m *amqp.Message) bool { return m.ApplicationProperties["region"] == "eu" }
	c, err := e.NewConsumer("regions", col.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()).
		SetFilter(stream.NewConsumerFilter([]string{"eu"}, false, post)))
	must(t, err)
	defer c.Close()
	got := col.wait(t, 100)
	time.Sleep(200 * time.Millisecond)
	if len(col.wait(t, 0)) != 100 {
		t.Fatalf("filtering consumer got %d messages, want the 100 of eu", col.count())
	}
	for _, b := range got {
		if !strings.HasPrefix(b, "eu-") {
			t.Fatalf("got %q", b)
		}
	}
}

// TestMetrics: the stream server's counters are on the Prometheus endpoint.
func TestMetrics(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("m", nil))
	publish(t, e, "m", "x", 100, nil)
	resp, err := http.Get("http://" + n.Addr(server.ListenerPrometheus).String() + "/metrics")
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	for _, want := range []string{"warren_stream_messages_confirmed_total 100", "warren_stream_messages_published_total 100", "warren_stream_connections "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestCreateStreamArguments: create-stream arguments become the stream
// queue's x-arguments, visible (and checked for equivalence) over AMQP.
func TestCreateStreamArguments(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("args", stream.NewStreamOptions().SetMaxAge(2*time.Hour).
		SetMaxLengthBytes(stream.ByteCapacity{}.MB(5)).SetMaxSegmentSizeBytes(stream.ByteCapacity{}.MB(1))))
	ch := n.Channel(t)
	same := amqp091.Table{"x-queue-type": "stream", "x-max-age": "7200s", "x-max-length-bytes": int64(5_000_000), "x-stream-max-segment-size-bytes": int64(1_000_000)}
	if _, err := ch.QueueDeclare("args", true, false, false, false, same); err != nil {
		t.Fatalf("equivalent AMQP declare: %v", err)
	}
	other := amqp091.Table{"x-queue-type": "stream", "x-max-age": "1h", "x-max-length-bytes": int64(5_000_000), "x-stream-max-segment-size-bytes": int64(1_000_000)}
	if _, err := ch.QueueDeclare("args", true, false, false, false, other); err == nil {
		t.Fatal("inequivalent x-max-age accepted")
	}
}

// TestSubEntryBatching: sub-entry batches (uncompressed and each
// compression the Go client offers) are stored as sent and read back.
func TestSubEntryBatching(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	for _, comp := range []stream.Compression{stream.Compression{}.None(), stream.Compression{}.Gzip(), stream.Compression{}.Snappy(), stream.Compression{}.Lz4(), stream.Compression{}.Zstd()} {
		t.Run(comp.String(), func(t *testing.T) {
			name := "sub-" + comp.String()
			must(t, e.DeclareStream(name, nil))
			publish(t, e, name, "m", 1000, stream.NewProducerOptions().SetSubEntrySize(100).SetCompression(comp))
			col := newCollector()
			c, err := e.NewConsumer(name, col.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
			must(t, err)
			defer c.Close()
			if got := col.wait(t, 1000); !slices.Equal(got[:1000], names("m", 0, 1000)) {
				t.Fatalf("got %v...", got[:3])
			}
		})
	}
}
