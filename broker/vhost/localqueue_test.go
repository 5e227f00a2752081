package vhost

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
)

// The forwarding side's lookups of a queue whose open is under way:
// LocalQueueIfOpen answers at once (not ready), LocalQueueContext and
// DeleteQueue (the owner's side of a forwarded delete) wait no longer than
// their context, and the lookups find the queue once it is open.
func TestLocalQueueLookupsOfAQueueStillOpening(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	types := DefaultQueueTypes()
	types["classic"] = QueueType{Open: func(ctx context.Context, v *Vhost, info queue.Info, args queue.Args) (queue.Queue, error) {
		started <- struct{}{}
		<-release
		return openClassic(ctx, v, info, args)
	}}
	ctx := context.Background()
	v, m := openVhost(t, types)

	if _, ready, err := v.LocalQueueIfOpen("nope"); !ready || !errors.Is(err, ErrNotFound) {
		t.Fatalf("LocalQueueIfOpen of no queue: ready %v err %v, want ready and NOT_FOUND", ready, err)
	}
	if _, err := m.DeclareQueue(ctx, meta.Queue{Vhost: "/", Name: "q", Durable: true, Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	<-started
	if q, ready, err := v.LocalQueueIfOpen("q"); ready || q != nil || err != nil {
		t.Fatalf("LocalQueueIfOpen while opening: %v %v %v, want not ready", q, ready, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := v.LocalQueueContext(short, "q"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LocalQueueContext while opening: %v, want its context's deadline", err)
	}
	if _, err := v.DeleteQueue(short, "q", QueueDeleteOptions{Force: true}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DeleteQueue while opening: %v, want its context's deadline", err)
	}
	if got := len(m.Queues("/")); got != 1 {
		t.Fatalf("%d queue records after a delete that gave up waiting for the open, want 1", got)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := v.LocalQueueContext(ctx, "q")
		waited <- err
	}()
	close(release)
	if err := <-waited; err != nil {
		t.Fatalf("LocalQueueContext once open: %v", err)
	}
	if q, ready, err := v.LocalQueueIfOpen("q"); !ready || q == nil || err != nil {
		t.Fatalf("LocalQueueIfOpen once open: %v %v %v", q, ready, err)
	}
}
