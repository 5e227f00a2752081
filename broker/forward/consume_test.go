package forward

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/queue"
)

// feedQueue is the owner's queue twin for consumers: it hands its ready
// messages, in order, to the consumer registered on it while the
// consumer takes them, and again when woken (as a queue's turn does).
type feedQueue struct {
	*memQueue
	mu        sync.Mutex
	c         queue.Consumer
	ready     []queue.Delivery
	delivered int
}

func (q *feedQueue) Consume(_ context.Context, c queue.Consumer, _ queue.ConsumeOptions) error {
	q.mu.Lock()
	q.c = c
	q.mu.Unlock()
	q.Wake(c)
	return nil
}

func (q *feedQueue) Cancel(queue.Consumer) {
	q.mu.Lock()
	q.c = nil
	q.mu.Unlock()
}

// add makes n messages ready, numbered from the seqs already made.
func (q *feedQueue) add(n int) { q.addSized(n, 0) }

// addSized adds n messages with bodies of size bytes (0: the sequence
// number's digits).
func (q *feedQueue) addSized(n, size int) {
	q.mu.Lock()
	for range n {
		seq := uint64(q.delivered + len(q.ready) + 1)
		body := []byte(fmt.Sprint(seq))
		if size > 0 {
			body = make([]byte, size)
		}
		q.ready = append(q.ready, queue.Delivery{Msg: &message.Message{Body: body}, Seq: seq, Queue: q})
	}
	q.mu.Unlock()
}

func (q *feedQueue) Wake(queue.Consumer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.c == nil {
		return
	}
	n := 0
	for n < len(q.ready) && q.c.Deliver(q.ready[n]) {
		n++
	}
	q.ready = q.ready[n:]
	q.delivered += n
	if n > 0 {
		q.c.Flush()
	}
}

func (q *feedQueue) counts() (ready, delivered int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ready), q.delivered
}

// client is a consumer on the consuming node: it takes deliveries while
// reading is set (a client whose socket takes them) and records them.
type client struct {
	noAck   bool
	reading atomic.Bool
	mu      sync.Mutex
	got     []uint64
}

func (c *client) NoAck() bool { return c.noAck }
func (c *client) Deliver(d queue.Delivery) bool {
	if !c.reading.Load() {
		return false
	}
	c.mu.Lock()
	c.got = append(c.got, d.Seq)
	c.mu.Unlock()
	return true
}
func (c *client) Flush()     {}
func (c *client) Cancelled() {}

func (c *client) seqs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// methodCounter counts a node's calls by method.
type methodCounter struct {
	transport.Network
	mu    sync.Mutex
	calls map[string]int
}

func (n *methodCounter) Call(ctx context.Context, node, method string, req []byte) ([]byte, error) {
	n.mu.Lock()
	n.calls[method]++
	n.mu.Unlock()
	return n.Network.Call(ctx, node, method, req)
}

func (n *methodCounter) count(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[method]
}

// consumeSetup is an owner "b" holding feedQueue "q" and a consuming
// node "a" whose calls are counted.
func consumeSetup(t *testing.T) (*Client, *methodCounter, *feedQueue, *Queue) {
	t.Helper()
	hub := transport.NewInmemHub()
	owner := &feedQueue{memQueue: &memQueue{info: queue.Info{Vhost: "/", Name: "q"}}}
	Serve(hub.Network("b"), feedLocal{owner}, nil, nil)
	nw := &methodCounter{Network: hub.Network("a"), calls: map[string]int{}}
	c := NewClient(Config{Network: nw, CallTimeout: 5 * time.Second})
	t.Cleanup(c.Close)
	return c, nw, owner, c.Queue(owner.info, "b").(*Queue)
}

// feedLocal is a Local holding one feedQueue.
type feedLocal struct{ q *feedQueue }

func (l feedLocal) LocalQueue(vhost, name string) (queue.Queue, error) {
	if vhost == l.q.info.Vhost && name == l.q.info.Name {
		return l.q, nil
	}
	return nil, fmt.Errorf("no queue %s", name)
}
func (feedLocal) DeleteQueue(context.Context, string, string, bool, bool) (int, error) {
	return 0, nil
}
func (feedLocal) NewMessageID() uint64 { return 1 }

// A consumer with automatic acks whose client takes nothing gets at most
// a window from the owner: autoAckWindow deliveries of small messages, or
// autoAckWindowBytes of large ones (not a window of messages whatever
// their size); the rest stay in the owner's queue. Once the client takes
// them, the credit goes back and every message arrives, once and in order.
func TestAutoAckConsumerThatTakesNothingHoldsAtMostAWindow(t *testing.T) {
	for _, tc := range []struct {
		name       string
		size, held int // body size (0: a few bytes), deliveries the owner lets out
		total      int
	}{
		{"messages", 0, autoAckWindow, 5 * autoAckWindow},
		{"bytes", 64 << 10, autoAckWindowBytes / (64 << 10), 3 * autoAckWindowBytes / (64 << 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, nw, owner, q := consumeSetup(t)
			owner.addSized(tc.total, tc.size)
			cl := &client{noAck: true}
			if err := q.Consume(context.Background(), cl, queue.ConsumeOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually.True(t, 10*time.Second, "a window's deliveries sent", func() bool {
				_, delivered := owner.counts()
				return delivered == tc.held
			})
			eventually.Holds(t, 300*time.Millisecond, "no more than a window while the client takes nothing", func() error {
				if ready, delivered := owner.counts(); delivered != tc.held || ready != tc.total-tc.held {
					return fmt.Errorf("%d delivered, %d ready", delivered, ready)
				}
				return nil
			})
			// The client's socket drains: its connection wakes the proxy
			// (as amqp does) and takes what the consuming node holds.
			cl.reading.Store(true)
			q.Wake(cl)
			eventually.True(t, 10*time.Second, "every message received", func() bool {
				return len(cl.seqs()) == tc.total
			})
			for i, s := range cl.seqs() {
				if s != uint64(i+1) {
					t.Fatalf("delivery %d is message %d", i, s)
				}
			}
			if n := nw.count(methodCredit); n == 0 {
				t.Fatal("no credit call: the owner sent more without the client's word")
			}
		})
	}
}

// A fast stream of deliveries, with several deliver calls in flight,
// arrives in the queue's order.
func TestDeliveriesArriveInOrderWithSeveralCallsInFlight(t *testing.T) {
	for _, noAck := range []bool{true, false} {
		t.Run(fmt.Sprint("noAck=", noAck), func(t *testing.T) {
			_, _, owner, q := consumeSetup(t)
			cl := &client{noAck: noAck}
			cl.reading.Store(true)
			if err := q.Consume(context.Background(), cl, queue.ConsumeOptions{Prefetch: 500}); err != nil {
				t.Fatal(err)
			}
			const total = 20000
			acked := 0
			for added := 0; added < total; added += 10 {
				owner.add(10)
				owner.Wake(nil)
				if !noAck { // settle what arrived, a few at a time
					got := cl.seqs()
					if len(got) > acked {
						q.Ack(got[acked:])
						acked = len(got)
					}
				}
			}
			eventually.True(t, 10*time.Second, "every message received", func() bool {
				if !noAck {
					got := cl.seqs()
					if len(got) > acked {
						q.Ack(got[acked:])
						acked = len(got)
					}
				}
				owner.Wake(nil)
				return len(cl.seqs()) == total
			})
			for i, s := range cl.seqs() {
				if s != uint64(i+1) {
					t.Fatalf("delivery %d is message %d", i, s)
				}
			}
		})
	}
}

// Acks made one at a time while settle calls are under way travel
// together: far fewer calls than acks, every one settled on the owner.
func TestSettlementsQueuedUpTravelInFewCalls(t *testing.T) {
	_, nw, owner, q := consumeSetup(t)
	const total = 2000
	owner.add(total)
	cl := &client{}
	cl.reading.Store(true)
	if err := q.Consume(context.Background(), cl, queue.ConsumeOptions{Prefetch: total}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "every message received", func() bool { return len(cl.seqs()) == total })
	for _, s := range cl.seqs() {
		q.Ack([]uint64{s})
	}
	q.waitSettled(context.Background())
	owner.mu.Lock()
	settled := slices.Clone(owner.settled)
	owner.mu.Unlock()
	slices.Sort(settled)
	if len(settled) != total || settled[0] != 1 || settled[total-1] != total {
		t.Fatalf("%d settled on the owner, want %d", len(settled), total)
	}
	if n := nw.count(methodSettle); n > total/4 {
		t.Fatalf("%d settle calls for %d acks: not batched", n, total)
	}
	t.Logf("%d acks in %d settle calls", total, nw.count(methodSettle))
}
