package stream_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
)

// env opens a stream client environment on node n as guest on "/".
func env(t testing.TB, n *brokertest.Node) *stream.Environment {
	t.Helper()
	return envURI(t, n.StreamURI())
}

func envURI(t testing.TB, uri string) *stream.Environment {
	t.Helper()
	e, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri(uri).SetRPCTimeout(10 * time.Second))
	if err != nil {
		t.Fatalf("connect %s: %v", uri, err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// publish sends n messages "prefix-i" and waits for every confirm.
func publish(t testing.TB, e *stream.Environment, name, prefix string, n int, opts *stream.ProducerOptions) {
	t.Helper()
	p, err := e.NewProducer(name, opts)
	must(t, err)
	defer p.Close()
	confirmed := make(chan int, 1)
	confirms := p.NotifyPublishConfirmation()
	go func() {
		got := 0
		for cs := range confirms {
			for _, c := range cs {
				if !c.IsConfirmed() {
					t.Errorf("message %d not confirmed: %v", c.GetPublishingId(), c.GetError())
				}
				got++
			}
			if got >= n {
				confirmed <- got
				return
			}
		}
	}()
	for i := range n {
		must(t, p.Send(amqp.NewMessage(fmt.Appendf(nil, "%s-%d", prefix, i))))
	}
	select {
	case <-confirmed:
	case <-time.After(20 * time.Second):
		t.Fatalf("publish %d to %s: confirms timed out", n, name)
	}
}

// collector gathers consumed messages.
type collector struct {
	mu      sync.Mutex
	bodies  []string
	offsets []int64
	more    chan struct{}
}

func newCollector() *collector { return &collector{more: make(chan struct{}, 1)} }

func (c *collector) handle(ctx stream.ConsumerContext, m *amqp.Message) {
	c.mu.Lock()
	c.bodies = append(c.bodies, string(m.GetData()))
	c.offsets = append(c.offsets, ctx.Consumer.GetOffset())
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// wait waits until n messages arrived and returns them.
func (c *collector) wait(t testing.TB, n int) []string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		got := len(c.bodies)
		out := append([]string(nil), c.bodies...)
		c.mu.Unlock()
		if got >= n {
			return out
		}
		select {
		case <-c.more:
		case <-deadline:
			t.Fatalf("consumed %d of %d messages", got, n)
		}
	}
}

// count returns how many messages arrived so far.
func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.bodies)
}

func (c *collector) firstOffset() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.offsets) == 0 {
		return -1
	}
	return c.offsets[0]
}

func names(prefix string, from, to int) []string {
	out := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}
