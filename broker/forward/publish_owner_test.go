package forward

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/queue"
)

// openingLocal is a memLocal whose queues in opening are not open until
// their channel is closed: LocalQueue waits for that, LocalQueueNow says
// not ready, LocalQueueWait waits with its context.
type openingLocal struct {
	*memLocal
	opening map[string]chan struct{}
	asked   atomic.Int32 // lookups of a queue opening
}

func (l *openingLocal) opened(vhost, name string) chan struct{} {
	ch := l.opening[vhost+"/"+name]
	if ch != nil {
		l.asked.Add(1)
	}
	return ch
}

func (l *openingLocal) LocalQueue(vhost, name string) (queue.Queue, error) {
	if ch := l.opened(vhost, name); ch != nil {
		<-ch
	}
	return l.memLocal.LocalQueue(vhost, name)
}

func (l *openingLocal) LocalQueueNow(vhost, name string) (queue.Queue, bool, error) {
	if ch := l.opened(vhost, name); ch != nil {
		select {
		case <-ch:
		default:
			return nil, false, nil
		}
	}
	q, err := l.memLocal.LocalQueue(vhost, name)
	return q, true, err
}

func (l *openingLocal) LocalQueueWait(ctx context.Context, vhost, name string) (queue.Queue, error) {
	if ch := l.opened(vhost, name); ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return l.memLocal.LocalQueue(vhost, name)
}

// A forwarded publish to a queue whose open is under way on the owner
// does not hold up the link it came on (the owner starts publishes on the
// reader of the peer's stream, where raft's appends come too): another
// call on that link is answered meanwhile. The held publishes, and the
// same sender's later ones to a queue that is open, are confirmed once
// the open ends, each queue's in publish order.
func TestAPublishToAQueueStillOpeningHoldsUpNoOtherCall(t *testing.T) {
	hub := transport.NewInmemHub()
	slow := &memQueue{info: queue.Info{Vhost: "/", Name: "slow", Durable: true}}
	open := &memQueue{info: queue.Info{Vhost: "/", Name: "open", Durable: true}}
	opened := make(chan struct{})
	l := &openingLocal{
		memLocal: &memLocal{qs: map[string]*memQueue{"//slow": slow, "//open": open}},
		opening:  map[string]chan struct{}{"//slow": opened},
	}
	nb := hub.Network("b")
	Serve(nb, l, nil, nil)
	const ping = "test.ping"
	nb.HandleOrdered(ping, transport.Waiting(func(context.Context, string, []byte) (func() ([]byte, error), error) {
		return func() ([]byte, error) { return []byte("pong"), nil }, nil
	}))
	na := hub.Network("a")
	c := NewClient(Config{Network: na, CallTimeout: 10 * time.Second})
	defer c.Close()

	var conf confirms
	const n = 200
	publishNumbered(c.Queue(slow.info, "b"), &conf, 0, n/2)
	eventually.True(t, 5*time.Second, "the owner got the publishes to the queue opening", func() bool {
		return l.asked.Load() > 0
	})
	publishNumbered(c.Queue(open.info, "b"), &conf, n/2, n)

	answered := make(chan error, 1)
	if err := na.Send(context.Background(), "b", ping, nil, func(_ []byte, err error) { answered <- err }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the other call on the link: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a publish to a queue still opening holds up the other calls on its link")
	}
	if a, nk := conf.counts(); a != 0 || nk != 0 {
		t.Fatalf("%d confirmed and %d nacked before the queue opened; want every one held", a, nk)
	}

	close(opened)
	eventually.True(t, 10*time.Second, "every message confirmed once the queue is open", func() bool {
		a, _ := conf.counts()
		return a == n
	})
	if _, nk := conf.counts(); nk != 0 {
		t.Fatalf("%d nacked", nk)
	}
	for _, q := range []*memQueue{slow, open} {
		if got := q.Stats().Ready; got != n/2 {
			t.Fatalf("queue %s has %d messages, want %d", q.info.Name, got, n/2)
		}
		if err := inOrder(q); err != nil {
			t.Fatalf("queue %s: %v", q.info.Name, err)
		}
	}
}
