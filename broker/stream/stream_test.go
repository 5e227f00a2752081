package stream_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
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
