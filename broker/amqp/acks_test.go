package amqp

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/queue"
)

// ackedQueue records the acks it is handed.
type ackedQueue struct {
	queue.Queue // other methods unused
	mu          sync.Mutex
	acked       []uint64
}

func (q *ackedQueue) Ack(seqs []uint64) {
	q.mu.Lock()
	q.acked = append(q.acked, seqs...)
	q.mu.Unlock()
}

func (q *ackedQueue) got() []uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.acked)
}

// remoteQueue is a queue on another node (a forward proxy has Node).
type remoteQueue struct{ *ackedQueue }

func (remoteQueue) Node() string { return "warren@n2" }

// Acks to a queue on another node go at the end of the socket read they
// came in (that node's consumer credit waits for them); acks to a local
// queue alone may wait for company, and still arrive.
func TestAcksToAQueueOnAnotherNodeAreNotHeldBack(t *testing.T) {
	var a ackBatch
	a.init()
	defer a.stop()
	local, remote := &ackedQueue{}, remoteQueue{&ackedQueue{}}
	a.add(remote, []uint64{1, 2})
	a.add(local, []uint64{7})
	a.flushSoon()
	if got := remote.got(); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("the remote queue got %v at the end of the read, want [1 2]", got)
	}
	a.add(local, []uint64{8})
	a.flushSoon()
	eventually.True(t, 5*time.Second, "the local queue's acks handed over", func() bool {
		return slices.Equal(local.got(), []uint64{7, 8})
	})
	a.add(remote, []uint64{3})
	a.flushSoon()
	if got := remote.got(); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("the remote queue got %v, want [1 2 3]", got)
	}
}

// A consumer out of credit makes the reader busy-poll for the client's
// ack only when its queue is on this node; for another node's queue the
// spins cost more than they saved (the ack still travels to that node).
func TestStarvedConsumerSpinsForAcksOnlyForALocalQueue(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    queue.Queue
		want bool
	}{
		{"local queue", &ackedQueue{}, true},
		{"queue on another node", remoteQueue{&ackedQueue{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &conn{}
			ch := &channel{c: c}
			cons := &consumer{ch: ch, q: tc.q, prefetch: 1}
			cons.remote = onAnotherNode(tc.q)
			if !cons.takeCredit() {
				t.Fatal("the first delivery of a prefetch of 1 was refused")
			}
			if c.wantAcks.Load() {
				t.Fatal("the reader spins for acks while the consumer still has credit")
			}
			if cons.takeCredit() {
				t.Fatal("a second delivery beyond a prefetch of 1 was allowed")
			}
			if got := c.wantAcks.Load(); got != tc.want {
				t.Fatalf("reader spins for the starved consumer's acks: %v, want %v", got, tc.want)
			}
		})
	}
}
