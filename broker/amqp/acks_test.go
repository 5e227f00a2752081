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
