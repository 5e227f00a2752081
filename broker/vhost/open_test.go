package vhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/brokertest/goroutines"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
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
		qs, err := v.Route(t.Context(), "", "slow", nil, nil)
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

	// A lookup that may wait no longer ends with its context, not with
	// the open, and says so (not "no queue").
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Queue", func() error { _, err := v.Queue(short, "slow", 0); return err }},
		{"QueueRecord", func() error { _, err := v.QueueRecord(short, "slow", 0); return err }},
		{"Route", func() error { _, err := v.Route(short, "", "slow", nil, nil); return err }},
		{"Bind", func() error {
			return v.Bind(short, routing.Binding{Source: "amq.direct", Destination: "slow", Key: "k"})
		}},
	} {
		if err := c.call(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s of a queue still opening, past its deadline: %v, want the deadline's error", c.name, err)
		}
	}

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
	if _, err := v.Queue(t.Context(), "slow", 0); !errors.Is(err, ErrNotFound) {
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

// Many declares applied in a row (a follower catching up on a log of
// declares) queue their opens on the vhost's openers: at most maxOpening
// goroutines, which take the opens in the order the declares were
// applied; each queue is open once its turn came. A vhost closed with
// opens still queued opens none of them and leaves their records.
func TestQueueOpensOnABoundedPool(t *testing.T) {
	const n = 10 * maxOpening
	for _, tc := range []struct {
		name  string
		close bool // close the vhost while the first opens are held up
	}{
		{name: "all open"},
		{name: "closed with opens queued", close: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			started := make(chan string, n)
			types := DefaultQueueTypes()
			types["classic"] = QueueType{Open: func(ctx context.Context, v *Vhost, info queue.Info, args queue.Args) (queue.Queue, error) {
				started <- info.Name
				<-release
				return openClassic(ctx, v, info, args)
			}}
			ctx := context.Background()
			v, m := openVhost(t, types)
			var releaseOnce sync.Once
			unblock := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(unblock) // before the vhost's Close, which waits for the opens
			// meta.Local runs the vhost's handler on the writer's
			// goroutine: the openers it starts carry this test's label.
			mark := goroutines.Label(t)
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("q%03d", i)
				if _, err := m.DeclareQueue(ctx, meta.Queue{Vhost: "/", Name: names[i], Durable: true, Node: "n1"}); err != nil {
					t.Fatal(err)
				}
			}
			first := map[string]bool{}
			for range maxOpening {
				first[<-started] = true
			}
			for _, name := range names[:maxOpening] {
				if !first[name] {
					t.Fatalf("opens started first: %v; want the first %d declared", first, maxOpening)
				}
			}
			eventually.Holds(t, 100*time.Millisecond, "no more than the pool's opens start", func() error {
				if len(started) != 0 {
					return fmt.Errorf("open of %s started while %d were under way", <-started, maxOpening)
				}
				return nil
			})
			if got, stacks := mark.Count(); got > maxOpening+1 { // the openers and this test
				t.Fatalf("%d goroutines for %d queued opens, want at most %d openers and the test's own:\n%s", got, n, maxOpening, stacks)
			}

			if tc.close {
				closed := make(chan error, 1)
				go func() { closed <- v.Close(ctx) }()
				eventually.True(t, 5*time.Second, "the vhost closed", v.isClosed)
				unblock()
				if err := <-closed; err != nil {
					t.Fatalf("close with opens queued: %v", err)
				}
				if len(started) != 0 {
					t.Fatalf("%d queued opens ran after the vhost closed", len(started))
				}
				if got := len(m.Queues("/")); got != n {
					t.Fatalf("metadata has %d queues after the close, want all %d", got, n)
				}
				return
			}
			unblock()
			for _, name := range names {
				if _, err := v.LocalQueueContext(ctx, name); err != nil {
					t.Fatalf("queue %s after its open: %v", name, err)
				}
			}
			if got := len(started) + maxOpening; got != n {
				t.Fatalf("%d opens, want %d", got, n)
			}
			eventually.True(t, 5*time.Second, "the openers end once the queue is empty", func() bool {
				v.openMu.Lock()
				defer v.openMu.Unlock()
				return v.openPool.workers == 0 && len(v.openPool.queue) == 0
			})
		})
	}
}
