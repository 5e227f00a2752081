package forward

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/queue"
)

// creditLoser fails the first credit call, as a link reset would (the
// owner stays up: no down report).
type creditLoser struct {
	transport.Network
	lost atomic.Bool
}

func (n *creditLoser) Call(ctx context.Context, node, method string, req []byte) ([]byte, error) {
	if method == methodCredit && n.lost.CompareAndSwap(false, true) {
		return nil, status.Error(codes.Unavailable, "stream closed")
	}
	return n.Network.Call(ctx, node, method, req)
}

// A credit call that fails once (a link reset; the owner stays up, so no
// down report cancels the consumer) is made again: the automatic-ack
// consumer gets every message, not only the first window. (With -short,
// the control: no call lost.)
func TestAutoAckConsumerGetsEveryMessageAfterACreditCallFails(t *testing.T) {
	hub := transport.NewInmemHub()
	owner := &feedQueue{memQueue: &memQueue{info: queue.Info{Vhost: "/", Name: "q"}}}
	Serve(hub.Network("b"), feedLocal{owner}, nil, nil)
	nl := &creditLoser{Network: hub.Network("a")}
	if testing.Short() {
		nl.lost.Store(true) // control: no call lost
	}
	c := NewClient(Config{Network: nl, CallTimeout: 5 * time.Second})
	t.Cleanup(c.Close)
	q := c.Queue(owner.info, "b").(*Queue)

	const total = 3 * autoAckWindow
	owner.add(total)
	cl := &client{noAck: true}
	if err := q.Consume(context.Background(), cl, queue.ConsumeOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "a window's deliveries sent", func() bool {
		_, delivered := owner.counts()
		return delivered == autoAckWindow
	})
	// Every deliver call answered (handed 0): the owner waits for credit.
	eventually.True(t, 10*time.Second, "the window is on the consumer's node", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, s := range c.subs {
			s.mu.Lock()
			n := len(s.pending)
			s.mu.Unlock()
			return n == autoAckWindow
		}
		return false
	})
	cl.reading.Store(true)
	q.Wake(cl) // the socket drained once; the client reads everything from now on
	eventually.True(t, 10*time.Second, "every message received", func() bool {
		return len(cl.seqs()) == total
	})
}

// An automatic-ack consumer on a channel with basic.qos(1) gets a whole
// window from the owner, as RabbitMQ ignores the prefetch of no-ack
// consumers: not one message per round trip through the owner.
func TestAutoAckConsumerIgnoresPrefetchForItsWindow(t *testing.T) {
	_, nw, owner, q := consumeSetup(t)
	const total = 3 * autoAckWindow
	owner.add(total)
	cl := &client{noAck: true}
	if err := q.Consume(context.Background(), cl, queue.ConsumeOptions{Prefetch: 1}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "a window's deliveries sent before the client takes any", func() bool {
		_, delivered := owner.counts()
		return delivered == autoAckWindow
	})
	cl.reading.Store(true)
	q.Wake(cl)
	eventually.True(t, 10*time.Second, "every message received", func() bool {
		return len(cl.seqs()) == total
	})
	if n := nw.count(methodCredit); n > total/autoAckWindow*4+4 {
		t.Fatalf("%d credit calls for %d messages: credit given per message", n, total)
	}
}
