package vhost

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
)

// A queue the metadata records is opened off the store's apply goroutine:
// while one queue's open is held up, other metadata writes (another
// queue's declare) complete; a publish routed to the queue and its own
// declare wait for the open instead of missing the queue, and a delete
// written meanwhile removes it once open.
func TestQueueOpensOffTheApplyGoroutine(t *testing.T) {
	release := make(chan struct{})
	started := make(chan string, 4)
	types := DefaultQueueTypes()
	types["classic"] = QueueType{Open: func(ctx context.Context, v *Vhost, info queue.Info, args queue.Args) (queue.Queue, error) {
		started <- info.Name
		if info.Name == "slow" {
			<-release
		}
		return openClassic(ctx, v, info, args)
	}}
	ctx := context.Background()
	v, m := openVhost(t, types)

	declared := make(chan error, 1)
	go func() {
		_, created, err := v.DeclareQueue(ctx, QueueDecl{Name: "slow", Durable: true})
		if err == nil && !created {
			err = errors.New("not created")
		}
		declared <- err
	}()
	if got := <-started; got != "slow" {
		t.Fatalf("opened %q first", got)
	}
	// The record is written and its open under way: the store takes
	// other writes, and their queues open, while it waits.
	q, created, err := v.DeclareQueue(ctx, QueueDecl{Name: "fast", Durable: true})
	if err != nil || !created || q == nil {
		t.Fatalf("declare of another queue while one opens: %v (created %v)", err, created)
	}
	if len(m.Queues("/")) != 2 {
		t.Fatalf("metadata has %d queues, want 2", len(m.Queues("/")))
	}
	routed := make(chan []queue.Queue, 1)
	go func() {
		qs, err := v.Route("", "slow", nil, nil)
		if err != nil {
			t.Error(err)
		}
		routed <- qs
	}()
	eventually.Holds(t, 200*time.Millisecond, "the declare and the publish wait for the open", func() error {
		if len(declared) != 0 || len(routed) != 0 {
			return errors.New("answered before the queue was open")
		}
		return nil
	})

	close(release)
	if err := <-declared; err != nil {
		t.Fatalf("declare of the slow queue: %v", err)
	}
	if qs := <-routed; len(qs) != 1 || qs[0].Info().Name != "slow" {
		t.Fatalf("a publish routed while the queue opened reached %v, want the queue", qs)
	}
	if _, err := v.DeleteQueue(ctx, "slow", QueueDeleteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Queue("slow", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted queue: %v, want not found", err)
	}
}

// A queue recorded by another writer and deleted before its open ended
// is opened, then deleted with its files; a vhost closed while a queue
// opens closes it.
func TestQueueDeletedOrClosedWhileOpening(t *testing.T) {
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
	if _, err := m.DeclareQueue(ctx, meta.Queue{Vhost: "/", Name: "q", Durable: true, Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	<-started
	deleted := make(chan error, 1)
	go func() { deleted <- m.DeleteQueue(ctx, "/", "q") }()
	eventually.Holds(t, 100*time.Millisecond, "the delete waits for the open", func() error {
		if len(deleted) != 0 {
			return errors.New("delete returned before the queue was open")
		}
		return nil
	})
	release <- struct{}{}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if qs := v.Queues(); len(qs) != 0 {
		t.Fatalf("%d queues open after the delete", len(qs))
	}

	if _, err := m.DeclareQueue(ctx, meta.Queue{Vhost: "/", Name: "q2", Durable: true, Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	<-started
	closed := make(chan error, 1)
	go func() { closed <- v.Close(ctx) }()
	eventually.Holds(t, 100*time.Millisecond, "close waits for the open", func() error {
		if len(closed) != 0 {
			return errors.New("close returned before the queue was open")
		}
		return nil
	})
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("close while a queue opened: %v", err)
	}
}
