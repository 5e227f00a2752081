package server_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// A stream client connected to a node that does not hold the stream is
// told by metadata where the stream is, and publishes and consumes there;
// deleting it works from any node; while its node is down it is not
// available (never "does not exist").
func TestStreamClientsFindTheNodeThatHoldsTheStream(t *testing.T) {
	c := brokertest.StartCluster(t, 2)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	if err := streamEnv(t, n2, "/").DeclareStream("events", &stream.StreamOptions{}); err != nil {
		t.Fatal(err)
	}

	env := streamEnv(t, n1, "/")
	md, err := env.StreamMetaData("events")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hostPort(md.Leader.Host, md.Leader.Port), n2.StreamAddr(); got != want {
		t.Fatalf("leader of the stream on n2, asked of n1: %s, want %s", got, want)
	}

	const total = 200
	confirmed := make(chan int, total)
	prod, err := env.NewProducer("events", nil)
	if err != nil {
		t.Fatalf("producer through n1: %v", err)
	}
	confirms := prod.NotifyPublishConfirmation() // before the first send (the client reads it unlocked)
	go func() {
		for cs := range confirms {
			for _, c := range cs {
				if c.IsConfirmed() {
					confirmed <- 1
				}
			}
		}
	}()
	for i := range total {
		if err := prod.Send(amqp.NewMessage([]byte(strconv.Itoa(i)))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range total {
		select {
		case <-confirmed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d confirmed", i, total)
		}
	}

	got := make(chan string, total)
	cons, err := env.NewConsumer("events", func(_ stream.ConsumerContext, m *amqp.Message) {
		got <- string(m.GetData())
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("consumer through n1: %v", err)
	}
	for i := range total {
		select {
		case b := <-got:
			if b != strconv.Itoa(i) {
				t.Fatalf("message %d: %q", i, b)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d missing", i)
		}
	}
	_ = cons.Close()
	_ = prod.Close()

	// The stream's node down: not available, which clients retry, rather
	// than gone.
	if err := streamEnv(t, n2, "/").DeclareStream("other", &stream.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	eventually.Succeeds(t, 10*time.Second, "the stream of a node that is down not available", func() error {
		md, err := env.StreamMetaData("other")
		if err != stream.StreamNotAvailable {
			return fmt.Errorf("metadata: %v (leader %v), want %v", err, md, stream.StreamNotAvailable)
		}
		return nil
	})
	c.Nodes[1] = brokertest.StartConfig(t, c.Nodes[1].Cfg)

	// Deleted through n1, gone on n2 too.
	if err := env.DeleteStream("events"); err != nil {
		t.Fatalf("delete through n1: %v", err)
	}
	if ok, err := streamEnv(t, c.Nodes[1], "/").StreamExists("events"); err != nil || ok {
		t.Fatalf("after delete through n1, exists on n2: %v %v", ok, err)
	}
}

func hostPort(host, port string) string { return fmt.Sprintf("%s:%s", host, port) }
