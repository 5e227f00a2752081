package forward

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/brokertest/goroutines"
	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/queue"
)

// publishNumbered publishes messages from..to-1 of one channel, one a
// batch, with their numbers as bodies.
func publishNumbered(q queue.Queue, conf queue.Confirmer, from, to int) {
	for i := from; i < to; i++ {
		q.Publish([]queue.Publish{{Msg: &message.Message{Body: []byte(strconv.Itoa(i))}, Confirm: conf, Tag: uint64(i)}})
	}
}

// inOrder reports the first message the owner holds out of publish order.
func inOrder(owner *memQueue) error {
	owner.mu.Lock()
	defer owner.mu.Unlock()
	last := -1
	for _, b := range owner.bodies {
		i, err := strconv.Atoi(b)
		if err != nil {
			return err
		}
		if i <= last {
			return fmt.Errorf("message %d after message %d", i, last)
		}
		last = i
	}
	return nil
}

// A slow link (the first publish call held up longer than the owner ever
// waited for a missing call) does not reorder a channel's messages: they
// reach the queue in the order published, and all are confirmed.
func TestForwardedPublishesKeepTheirOrderOnASlowLink(t *testing.T) {
	hub, c, _, owner := setup(t)
	var first atomic.Bool
	hub.SetDelay(func(_, _, method string) time.Duration {
		if method == methodPublish && first.CompareAndSwap(false, true) {
			return 2500 * time.Millisecond
		}
		return 0
	})
	q := c.Queue(owner.info, "b")
	var conf confirms
	const n = 3000
	publishNumbered(q, &conf, 0, 1) // the slow call
	for i := 1; i < n; i += 100 {
		publishNumbered(q, &conf, i, min(i+100, n))
		time.Sleep(time.Millisecond) // calls of their own
	}
	eventually.True(t, 20*time.Second, "every message confirmed", func() bool {
		a, _ := conf.counts()
		return a == n
	})
	if err := inOrder(owner); err != nil {
		t.Fatal(err)
	}
}

// A publish call that fails (the link cut under it) nacks its messages
// and holds up nothing: the channel's next messages are confirmed, and the
// queue has everything it took in publish order.
func TestAFailedPublishCallHoldsUpNothing(t *testing.T) {
	hub, c, _, owner := setup(t)
	owner.hold = make(chan struct{}) // the owner confirms nothing yet
	q := c.Queue(owner.info, "b")
	var conf confirms
	publishNumbered(q, &conf, 0, 100)
	eventually.True(t, 10*time.Second, "the owner has the first messages", func() bool {
		owner.mu.Lock()
		defer owner.mu.Unlock()
		return len(owner.bodies) == 100
	})
	hub.Partition("a", "b")
	eventually.True(t, 10*time.Second, "the first messages nacked", func() bool {
		_, nacked := conf.counts()
		return nacked == 100
	})
	hub.Heal()
	close(owner.hold)
	publishNumbered(q, &conf, 100, 1100)
	eventually.True(t, 10*time.Second, "the next messages confirmed", func() bool {
		a, _ := conf.counts()
		return a == 1000
	})
	if err := inOrder(owner); err != nil {
		t.Fatal(err)
	}
}

// Close nacks the publishes under way and queued, ends the goroutines
// that sent them, and nacks what is published after it.
func TestCloseNacksWhatIsUnderWayAndLeavesNoGoroutine(t *testing.T) {
	mark := goroutines.Label(t) // counts this test's goroutines, not the package's
	_, c, _, owner := setup(t)
	owner.hold = make(chan struct{}) // confirms nothing before Close
	q := c.Queue(owner.info, "b")
	before, _ := mark.Count()
	var conf confirms
	publishNumbered(q, &conf, 0, 1000)
	eventually.True(t, 10*time.Second, "the owner has messages", func() bool {
		owner.mu.Lock()
		defer owner.mu.Unlock()
		return len(owner.bodies) > 0
	})
	c.Close()
	if a, nacked := conf.counts(); a != 0 || nacked != 1000 {
		t.Fatalf("after Close: %d acked, %d nacked; want 0, 1000", a, nacked)
	}
	publishNumbered(q, &conf, 1000, 1010)
	if _, nacked := conf.counts(); nacked != 1010 {
		t.Fatalf("published after Close: %d nacked in all, want 1010", nacked)
	}
	close(owner.hold) // the twin's own waiting confirms end too
	eventually.Succeeds(t, 10*time.Second, "the Client's goroutines ended", func() error {
		if n, stacks := mark.Count(); n < 0 || n > before {
			return fmt.Errorf("%d goroutines, %d before the publishes:\n%s", n, before, stacks)
		}
		return nil
	})
}

// deferringPublisher records a publisher's confirms, deferred or not,
// and which of the deferred ones reached its client (what a Flush wrote).
type deferringPublisher struct {
	mu               sync.Mutex
	direct, deferred int // confirmed with Confirm, with ConfirmDeferred
	written          int // of the deferred ones, flushed
}

func (c *deferringPublisher) Confirm(tags []uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.direct += len(tags)
}

func (c *deferringPublisher) ConfirmDeferred(tags []uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deferred += len(tags)
}

func (c *deferringPublisher) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written = c.deferred
}

func (c *deferringPublisher) counts() (direct, deferred, written int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.direct, c.deferred, c.written
}

// On a Network whose readers run a function once they have handed over
// the answers they read, the confirms of another node's publish answers
// are left in the publisher's output until that function runs; a
// publish to the node itself, answered where its handler runs, confirms at
// once. Close flushes what is left and unregisters.
func TestConfirmsOfAnswersWaitForTheReadersFlush(t *testing.T) {
	hub := transport.NewInmemHub()
	owner := &memQueue{info: queue.Info{Vhost: "/", Name: "q", Durable: true}}
	local := &memLocal{qs: map[string]*memQueue{"//q": owner}}
	Serve(hub.Network("b"), local, nil, nil)
	Serve(hub.Network("a"), local, nil, nil)
	nw := &answersReadingNetwork{Network: hub.Network("a")}
	c := NewClient(Config{Network: nw, CallTimeout: 5 * time.Second})
	readerIdle := func() {
		if fn := nw.registered(); fn != nil {
			fn()
		}
	}

	var remote, self deferringPublisher
	const n = 10
	for i := range n {
		c.Queue(owner.info, "b").Publish([]queue.Publish{{Msg: &message.Message{Body: []byte{byte(i)}}, Confirm: &remote, Tag: uint64(i)}})
		c.Queue(owner.info, "a").Publish([]queue.Publish{{Msg: &message.Message{Body: []byte{byte(i)}}, Confirm: &self, Tag: uint64(i)}})
	}
	eventually.True(t, 10*time.Second, "every message confirmed", func() bool {
		_, d, _ := remote.counts()
		s, _, _ := self.counts()
		return d == n && s == n
	})
	if direct, _, written := remote.counts(); direct != 0 || written != 0 {
		t.Fatalf("before the reader's flush: %d confirmed at once, %d written; want 0 and 0", direct, written)
	}
	if _, deferred, _ := self.counts(); deferred != 0 {
		t.Fatalf("%d confirms of publishes to the node itself deferred, want 0", deferred)
	}
	readerIdle()
	if _, _, written := remote.counts(); written != n {
		t.Fatalf("after the reader's flush %d confirms written, want %d", written, n)
	}

	c.Queue(owner.info, "b").Publish([]queue.Publish{{Msg: &message.Message{Body: []byte{n}}, Confirm: &remote, Tag: n}})
	eventually.True(t, 10*time.Second, "the last message confirmed", func() bool {
		_, d, _ := remote.counts()
		return d == n+1
	})
	c.Close()
	if _, _, written := remote.counts(); written != n+1 {
		t.Fatalf("after Close %d confirms written, want %d", written, n+1)
	}
	if nw.registered() != nil {
		t.Fatal("Close left its function registered")
	}
}

// answersReadingNetwork is a Network whose readers would run the function
// registered with OnAnswersRead (the test runs it as a reader would).
type answersReadingNetwork struct {
	transport.Network
	mu sync.Mutex
	fn func()
}

func (n *answersReadingNetwork) OnAnswersRead(fn func()) (stop func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fn = fn
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.fn = nil
	}
}

func (n *answersReadingNetwork) registered() func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fn
}
