package meta

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestDeclareQueueArbitration(t *testing.T) {
	owner := &QueueOwner{Node: "n1", Conn: 7}
	base := Queue{Vhost: "/", Name: "q", Type: "classic", Durable: true, Node: "n1", Arguments: map[string]any{"x-max-length": int32(10)}}
	with := func(f func(*Queue)) Queue { q := base; f(&q); return q }
	excl := with(func(q *Queue) { q.Exclusive, q.Durable, q.Owner = true, false, owner })
	cases := []struct {
		name    string
		first   Queue
		second  Queue
		kind    error  // nil: accepted
		text    string // part of the refusal's text
		created bool   // the second declare created the queue
	}{
		{"same declare", base, with(func(q *Queue) { q.Arguments = map[string]any{"x-max-length": int64(10)} }), nil, "", false},
		{"other name", base, with(func(q *Queue) { q.Name = "r" }), nil, "", true},
		{"durable differs", base, with(func(q *Queue) { q.Durable = false }), ErrInequivalent, "inequivalent arg 'durable' for queue 'q' in vhost '/': received 'false' but current is 'true'", false},
		{"argument differs", base, with(func(q *Queue) { q.Arguments = map[string]any{"x-max-length": 11} }), ErrInequivalent, "inequivalent arg 'x-max-length'", false},
		{"argument missing", base, with(func(q *Queue) { q.Arguments = nil }), ErrInequivalent, "inequivalent arg 'x-max-length'", false},
		{"exclusive of its owner", excl, excl, nil, "", false},
		{"exclusive of another connection", excl, with(func(q *Queue) { q.Exclusive, q.Durable, q.Owner = true, false, &QueueOwner{Node: "n1", Conn: 8} }), ErrLocked, "cannot obtain exclusive access to locked queue 'q'", false},
		{"exclusive, no connection", excl, with(func(q *Queue) { q.Exclusive, q.Durable, q.Owner = true, false, nil }), ErrLocked, "locked queue", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := openT(t, t.TempDir())
			ctx := context.Background()
			must(t, l.PutVhost(ctx, Vhost{Name: "/"}))
			if created, err := l.DeclareQueue(ctx, c.first); err != nil || !created {
				t.Fatalf("first declare: created %v, %v", created, err)
			}
			created, err := l.DeclareQueue(ctx, c.second)
			if c.kind == nil {
				if err != nil || created != c.created {
					t.Fatalf("second declare: created %v, %v; want created %v", created, err, c.created)
				}
				return
			}
			var me *Error
			if !errors.As(err, &me) || !errors.Is(err, c.kind) || !strings.Contains(me.Text, c.text) {
				t.Fatalf("second declare: %v; want %v with %q", err, c.kind, c.text)
			}
			if got := l.Queues("/"); len(got) != 1 || got[0].Durable != c.first.Durable {
				t.Fatalf("queues after a refused declare: %+v", got)
			}
		})
	}
}

// Declares of one name racing with different arguments: one wins, the
// others are refused, and one event is published.
func TestDeclareQueueConcurrent(t *testing.T) {
	l := openT(t, t.TempDir())
	ctx := context.Background()
	must(t, l.PutVhost(ctx, Vhost{Name: "/"}))
	var mu sync.Mutex
	events := 0
	l.Subscribe(func(e Event) {
		if e.Kind == QueuePut {
			mu.Lock()
			events++
			mu.Unlock()
		}
	})
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.DeclareQueue(ctx, Queue{Vhost: "/", Name: "q", Durable: true, Arguments: map[string]any{"x-max-length": i}})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrInequivalent):
			t.Fatalf("refusal: %v", err)
		}
	}
	if ok != 1 || events != 1 || len(l.Queues("/")) != 1 {
		t.Fatalf("%d declares accepted, %d events, queues %+v; want one of each", ok, events, l.Queues("/"))
	}
}

func TestDeclareExchangeArbitration(t *testing.T) {
	base := Exchange{Vhost: "/", Name: "x", Type: "direct", Durable: true, Arguments: map[string]any{"alternate-exchange": "ae"}}
	with := func(f func(*Exchange)) Exchange { x := base; f(&x); return x }
	cases := []struct {
		name   string
		second Exchange
		text   string // "" accepted
	}{
		{"same", base, ""},
		{"type differs", with(func(x *Exchange) { x.Type = "fanout" }), "inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'"},
		{"durable differs", with(func(x *Exchange) { x.Durable = false }), "inequivalent arg 'durable'"},
		{"argument differs", with(func(x *Exchange) { x.Arguments = map[string]any{"alternate-exchange": "other"} }), "inequivalent arg 'alternate-exchange'"},
		{"argument missing", with(func(x *Exchange) { x.Arguments = nil }), "inequivalent arg 'alternate-exchange'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := openT(t, t.TempDir())
			ctx := context.Background()
			must(t, l.PutVhost(ctx, Vhost{Name: "/"}))
			if _, err := l.DeclareExchange(ctx, base); err != nil {
				t.Fatal(err)
			}
			created, err := l.DeclareExchange(ctx, c.second)
			if c.text == "" {
				if err != nil || created {
					t.Fatalf("redeclare: created %v, %v", created, err)
				}
				return
			}
			if !errors.Is(err, ErrInequivalent) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("redeclare: %v; want %q", err, c.text)
			}
		})
	}
}

// Removing a binding deletes an auto-delete source exchange left without
// bindings, and the bindings to it, the way the routing table does.
func TestAutoDeleteExchangeCascade(t *testing.T) {
	bind := func(src, dst, dt string) Binding {
		return Binding{Vhost: "/", Source: src, Destination: dst, DestinationType: dt}
	}
	cases := []struct {
		name   string
		delete func(ctx context.Context, l *Local) error
		left   []string // exchanges left
	}{
		{"queue deleted", func(ctx context.Context, l *Local) error { return l.DeleteQueue(ctx, "/", "q") }, []string{"keep"}},
		{"binding deleted", func(ctx context.Context, l *Local) error { return l.DeleteBinding(ctx, bind("ad2", "q", "queue")) }, []string{"keep"}},
		{"destination exchange deleted", func(ctx context.Context, l *Local) error { return l.DeleteExchange(ctx, "/", "ad2") }, []string{"keep"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := openT(t, t.TempDir())
			ctx := context.Background()
			must(t, l.PutVhost(ctx, Vhost{Name: "/"}))
			// keep -> ad1 -> ad2 -> q; ad1 and ad2 are auto-delete.
			for _, x := range []Exchange{{Name: "keep"}, {Name: "ad1", AutoDelete: true}, {Name: "ad2", AutoDelete: true}} {
				x.Vhost, x.Type = "/", "fanout"
				_, err := l.DeclareExchange(ctx, x)
				must(t, err)
			}
			_, err := l.DeclareQueue(ctx, Queue{Vhost: "/", Name: "q"})
			must(t, err)
			for _, b := range []Binding{bind("keep", "ad1", "exchange"), bind("ad1", "ad2", "exchange"), bind("ad2", "q", "queue")} {
				must(t, l.PutBinding(ctx, b))
			}
			must(t, c.delete(ctx, l))
			var left []string
			for _, x := range l.Exchanges("/") {
				left = append(left, x.Name)
			}
			if strings.Join(left, ",") != strings.Join(c.left, ",") || len(l.Bindings("/")) != 0 {
				t.Fatalf("exchanges %v, bindings %+v; want %v and none", left, l.Bindings("/"), c.left)
			}
		})
	}
}
