package stream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/stream/client"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// startWarren runs the warren binary on dir and returns it once it has
// started, with the stream URI of the port the kernel gave its listener.
func startWarren(t *testing.T, bin, dir string) (*brokertest.Process, string) {
	t.Helper()
	p := brokertest.StartProcess(t, bin, dir, "stream.listen=127.0.0.1:0", "amqp.listen=127.0.0.1:0",
		"http.listen=", "prometheus.listen=", "cluster.listen=127.0.0.1:0")
	return p, "rabbitmq-stream://guest:guest@" + p.Addr("stream") + "/%2f"
}

// TestKill9KeepsConfirmedStreamMessages: messages confirmed to a
// stream-protocol publisher are all there, once, after kill -9 and
// restart, and the publisher sequence covers them.
func TestKill9KeepsConfirmedStreamMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the warren binary")
	}
	bin := brokertest.BuildWarren(t)
	dir := t.TempDir()
	proc, uri := startWarren(t, bin, dir)

	var mu sync.Mutex
	confirmed := map[uint64]bool{}
	enough := make(chan struct{})
	var once sync.Once
	ctx := context.Background()
	conn, err := client.Dial(ctx, uri, client.Options{OnConfirm: func(_ uint8, ids []uint64) {
		mu.Lock()
		for _, id := range ids {
			confirmed[id] = true
		}
		if len(confirmed) >= 20000 {
			once.Do(func() { close(enough) })
		}
		mu.Unlock()
	}})
	must(t, err)
	must(t, conn.CreateStream(ctx, "crash", nil, false))
	must(t, conn.DeclarePublisher(ctx, 1, "crasher", "crash"))
	go func() {
		var frame []byte
		for id := uint64(1); ; id += 50 {
			frame = frame[:0]
			for i := range uint64(50) {
				frame = append(frame, proto.Encode(nil, &proto.Publish{Version: 1, PublisherID: 1, Messages: []proto.PublishedMessage{
					{PublishingID: id + i, Entry: proto.SimpleEntry(client.DataMessage(fmt.Appendf(nil, "%d", id+i))), Records: 1}}})...)
			}
			if conn.WriteFrame(frame) != nil {
				return
			}
		}
	}()
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatal("too few confirms before the crash")
	}
	proc.Kill() // SIGKILL, mid-stream
	<-conn.Done()
	mu.Lock()
	want := len(confirmed)
	var maxID uint64
	for id := range confirmed {
		maxID = max(maxID, id)
	}
	mu.Unlock()

	_, uri = startWarren(t, bin, dir)
	e := envURI(t, uri)
	seq, err := e.QuerySequence("crasher", "crash")
	must(t, err)
	if uint64(seq) < maxID {
		t.Fatalf("publisher sequence %d after restart, below the highest confirmed id %d", seq, maxID)
	}
	col := newCollector()
	c, err := e.NewConsumer("crash", col.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	must(t, err)
	defer c.Close()
	col.wait(t, int(seq))
	got := map[string]int{}
	for _, b := range col.wait(t, 0) {
		got[b]++
	}
	for id := range confirmed {
		if n := got[fmt.Sprint(id)]; n != 1 {
			t.Fatalf("confirmed message %d found %d times after kill -9", id, n)
		}
	}
	t.Logf("%d confirmed messages before kill -9, %d in the stream after restart (publisher sequence %d)", want, len(got), seq)
}
