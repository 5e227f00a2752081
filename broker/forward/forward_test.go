package forward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/queue"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// memQueue is a twin of queue.Queue that keeps what it is given and
// confirms it at once (or refuses it when refuse is set).
type memQueue struct {
	queue.Queue // unused methods panic
	info        queue.Info
	mu          sync.Mutex
	bodies      []string
	refuse      bool
	hold        chan struct{} // if set, confirms wait until it is closed
	overloaded  chan struct{} // if set, Throttle waits until it is closed
	settled     []uint64      // seqs acked, requeued or rejected
}

func (q *memQueue) Info() queue.Info { return q.info }
func (q *memQueue) Throttle(ctx context.Context) error {
	q.mu.Lock()
	ch := q.overloaded
	q.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (q *memQueue) Stats() queue.Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return queue.Stats{Ready: len(q.bodies)}
}
func (q *memQueue) Purge(context.Context) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.bodies)
	q.bodies = nil
	return n, nil
}
func (q *memQueue) Publish(batch []queue.Publish) {
	q.mu.Lock()
	for _, p := range batch {
		q.bodies = append(q.bodies, string(p.Msg.Body))
	}
	refuse, hold := q.refuse, q.hold
	q.mu.Unlock()
	if hold != nil {
		go func() {
			<-hold
			q.confirm(batch, !refuse)
		}()
		return
	}
	q.confirm(batch, !refuse)
}

func (q *memQueue) confirm(batch []queue.Publish, ok bool) {
	for _, p := range batch {
		if p.Confirm != nil {
			p.Confirm.Confirm([]uint64{p.Tag}, ok)
		}
	}
}

type memLocal struct {
	qs  map[string]*memQueue
	ids atomic.Uint64
}

func (q *memQueue) Consume(context.Context, queue.Consumer, queue.ConsumeOptions) error {
	return nil
}
func (q *memQueue) Cancel(queue.Consumer) {}
func (q *memQueue) Wake(queue.Consumer)   {}
func (q *memQueue) Ack(s []uint64)        { q.settle(s) }
func (q *memQueue) Requeue(s []uint64)    { q.settle(s) }
func (q *memQueue) Reject(s []uint64)     { q.settle(s) }
func (q *memQueue) settle(s []uint64) {
	q.mu.Lock()
	q.settled = append(q.settled, s...)
	q.mu.Unlock()
}

func (l *memLocal) LocalQueue(vhost, name string) (queue.Queue, error) {
	if q, ok := l.qs[vhost+"/"+name]; ok {
		return q, nil
	}
	return nil, errors.New("no such queue")
}
func (l *memLocal) DeleteQueue(context.Context, string, string, bool, bool) (int, error) {
	return 0, nil
}
func (l *memLocal) NewMessageID() uint64 { return l.ids.Add(1) }

// countingNetwork counts the publish calls a node makes.
type countingNetwork struct {
	transport.Network
	publishes atomic.Int64
}

func (n *countingNetwork) Call(ctx context.Context, node, method string, req []byte) ([]byte, error) {
	if method == methodPublish {
		n.publishes.Add(1)
	}
	return n.Network.Call(ctx, node, method, req)
}

func (n *countingNetwork) Send(ctx context.Context, node, method string, req []byte, done func([]byte, error)) error {
	if method == methodPublish {
		n.publishes.Add(1)
	}
	return n.Network.Send(ctx, node, method, req, done)
}

// confirms records a publisher's confirms.
type confirms struct {
	mu        sync.Mutex
	ack, nack int
}

func (c *confirms) Confirm(tags []uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.ack += len(tags)
	} else {
		c.nack += len(tags)
	}
}

func (c *confirms) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ack, c.nack
}

func setup(t *testing.T) (*transport.InmemHub, *Client, *countingNetwork, *memQueue) {
	t.Helper()
	hub := transport.NewInmemHub()
	owner := &memQueue{info: queue.Info{Vhost: "/", Name: "q", Durable: true}}
	Serve(hub.Network("b"), &memLocal{qs: map[string]*memQueue{"//q": owner}}, nil, nil)
	nw := &countingNetwork{Network: hub.Network("a")}
	c := NewClient(Config{Network: nw, CallTimeout: 5 * time.Second})
	return hub, c, nw, owner
}

func TestPublishesQueuedUpTravelInFewCallsInOrder(t *testing.T) {
	_, c, nw, owner := setup(t)
	q := c.Queue(owner.info, "b")
	var conf confirms
	const n = 20000
	for i := range n {
		q.Publish([]queue.Publish{{Msg: &message.Message{ID: uint64(i), Body: []byte{byte(i), byte(i >> 8)}}, Confirm: &conf, Tag: uint64(i)}})
	}
	eventually.True(t, 10*time.Second, "every message confirmed", func() bool {
		a, _ := conf.counts()
		return a == n
	})
	if calls := nw.publishes.Load(); calls > n/10 {
		t.Fatalf("%d publish calls for %d messages: not batched", calls, n)
	}
	owner.mu.Lock()
	defer owner.mu.Unlock()
	if len(owner.bodies) != n {
		t.Fatalf("owner has %d messages, want %d", len(owner.bodies), n)
	}
	for i, b := range owner.bodies {
		if b != string([]byte{byte(i), byte(i >> 8)}) {
			t.Fatalf("message %d out of order", i)
		}
	}
}

func TestPublishesToAnUnreachableOrRefusingOwnerAreNacked(t *testing.T) {
	cases := []struct {
		name  string
		setup func(hub *transport.InmemHub, owner *memQueue, q *queue.Info)
	}{
		{"owner partitioned", func(hub *transport.InmemHub, _ *memQueue, _ *queue.Info) { hub.Partition("a", "b") }},
		{"owner refuses", func(_ *transport.InmemHub, owner *memQueue, _ *queue.Info) { owner.refuse = true }},
		{"queue not on the owner", func(_ *transport.InmemHub, _ *memQueue, info *queue.Info) { info.Name = "other" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hub, c, _, owner := setup(t)
			info := owner.info
			tc.setup(hub, owner, &info)
			q := c.Queue(info, "b")
			var conf confirms
			for i := range 100 {
				q.Publish([]queue.Publish{{Msg: &message.Message{Body: []byte("x")}, Confirm: &conf, Tag: uint64(i)}})
			}
			eventually.True(t, 10*time.Second, "every message nacked", func() bool {
				a, n := conf.counts()
				return a == 0 && n == 100
			})
		})
	}
}

func TestStatsAndPurgeOfAnUnreachableOwnerAreHomeDown(t *testing.T) {
	hub, c, _, owner := setup(t)
	q := c.Queue(owner.info, "b").(*Queue)
	owner.Publish([]queue.Publish{{Msg: &message.Message{Body: []byte("x")}}})
	if st, err := q.StatsContext(context.Background()); err != nil || st.Ready != 1 {
		t.Fatalf("stats: %+v %v", st, err)
	}
	hub.Partition("a", "b")
	want := "home node 'b' of durable queue 'q' in vhost '/' is down or inaccessible"
	if _, err := q.Purge(context.Background()); err == nil || !contains(err.Error(), want) {
		t.Fatalf("purge with the owner unreachable: %v, want %q", err, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A node's settlement of messages it does not hold (they were requeued
// when its consumer was dropped, or the queue was declared anew) settles
// nothing: the seq may belong to another consumer's delivery now.
func TestStaleSettlementsSettleNothing(t *testing.T) {
	hub := transport.NewInmemHub()
	owner := &memQueue{info: queue.Info{Vhost: "/", Name: "q"}}
	Serve(hub.Network("b"), &memLocal{qs: map[string]*memQueue{"//q": owner}}, nil, nil)
	a := hub.Network("a")
	for _, op := range []byte{settleAck, settleRequeue, settleReject} {
		if _, err := a.Call(context.Background(), "b", methodSettle, appendSeqs(appendSettleRef(nil, "/", "q"), op, []uint64{7, 8})); err != nil {
			t.Fatal(err)
		}
	}
	owner.mu.Lock()
	defer owner.mu.Unlock()
	if len(owner.settled) != 0 {
		t.Fatalf("stale settlements settled %v", owner.settled)
	}
}

// The owner answers a publish call once its messages are confirmed, and
// not while their queue is overloaded (its flow control holds the
// sender's next calls); confirmed from another goroutine than the one
// that started the call, or while it starts, the answer comes either way.
func TestPublishAnswerWaitsForConfirmsAndFlowControl(t *testing.T) {
	for _, tc := range []struct {
		name             string
		hold, overloaded bool
	}{
		{"confirmed as published", false, false},
		{"confirmed later", true, false},
		{"queue overloaded", false, true},
		{"confirmed later, queue overloaded", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c, _, owner := setup(t)
			var hold, overloaded chan struct{}
			if tc.hold {
				hold = make(chan struct{})
			}
			if tc.overloaded {
				overloaded = make(chan struct{})
			}
			owner.mu.Lock()
			owner.hold, owner.overloaded = hold, overloaded
			owner.mu.Unlock()
			q := c.Queue(owner.info, "b")
			var conf confirms
			for i := range 50 {
				q.Publish([]queue.Publish{{Msg: &message.Message{Body: []byte("x")}, Confirm: &conf, Tag: uint64(i)}})
			}
			none := func() error {
				if a, n := conf.counts(); a+n > 0 {
					return fmt.Errorf("%d acks, %d nacks", a, n)
				}
				return nil
			}
			if hold != nil {
				eventually.Holds(t, 100*time.Millisecond, "no confirm before the queue's", none)
				close(hold)
			}
			if overloaded != nil {
				eventually.Holds(t, 100*time.Millisecond, "no confirm while the queue is overloaded", none)
				owner.mu.Lock()
				close(overloaded)
				owner.mu.Unlock()
			}
			eventually.True(t, 10*time.Second, "every message confirmed", func() bool {
				a, n := conf.counts()
				return a == 50 && n == 0
			})
		})
	}
}

// A publish call is answered once, with the verdicts, by whichever
// goroutine confirms the last message, also when its context ended first:
// nothing watches the context of a call no goroutine waits for (its
// caller fails it at its own end; a timer a call to answer early cost the
// forwarded path 6% of its CPU).
func TestPublishCallAnsweredOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		endFirst   bool
		wantAnswer string
	}{
		{"confirms first", false, "verdicts"},
		{"context ends first", true, "verdicts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hub, c, _, owner := setup(t)
			owner.hold = make(chan struct{})
			h := newHandlers(hub.Network("c"), &memLocal{qs: map[string]*memQueue{"//q": owner}}, nil, nil)
			q := c.Queue(owner.info, "b").(*Queue)
			req := appendPublishes(nil, []item{{q: q, p: queue.Publish{Msg: &message.Message{Body: []byte("x")}}}, {q: q, p: queue.Publish{Msg: &message.Message{Body: []byte("y")}}}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var answers atomic.Int32
			got := make(chan string, 2)
			if err := h.publish(ctx, "a", req, func(resp []byte, err error) {
				answers.Add(1)
				switch {
				case status.Code(err) == codes.Canceled:
					got <- "canceled"
				case err == nil && len(resp) == 2 && resp[0] == verdictOK && resp[1] == verdictOK:
					got <- "verdicts"
				default:
					got <- fmt.Sprintf("%v %v", resp, err)
				}
			}); err != nil {
				t.Fatal(err)
			}
			if tc.endFirst {
				cancel()
				select {
				case a := <-got:
					t.Fatalf("answered %s before the confirms", a)
				case <-time.After(50 * time.Millisecond):
				}
				close(owner.hold)
				if a := <-got; a != tc.wantAnswer {
					t.Fatalf("answered %s, want %s", a, tc.wantAnswer)
				}
			} else {
				close(owner.hold)
				if a := <-got; a != tc.wantAnswer {
					t.Fatalf("answered %s, want %s", a, tc.wantAnswer)
				}
				cancel()
			}
			eventually.Holds(t, 100*time.Millisecond, "one answer", func() error {
				if n := answers.Load(); n != 1 {
					return fmt.Errorf("%d answers", n)
				}
				return nil
			})
		})
	}
}
