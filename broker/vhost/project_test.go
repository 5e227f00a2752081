package vhost

import (
	"context"
	"errors"
	"testing"

	"github.com/warrenmq/warren/broker/meta"
)

// After a Reset (a replicated store installed a snapshot) the vhost is
// what the store's state says, whatever events it missed.
func TestResetResyncs(t *testing.T) {
	ctx := context.Background()
	v, m := openVhost(t, nil)
	for _, name := range []string{"keep", "drop"} {
		if _, _, err := v.DeclareQueue(ctx, QueueDecl{Name: name, Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.DeclareExchange(ctx, ExchangeDecl{Name: "x", Type: "fanout", Durable: true}); err != nil {
		t.Fatal(err)
	}
	// The vhost stops hearing events; the state moves on without it.
	v.unsub()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.DeleteQueue(ctx, "/", "drop"))
	must(m.PutQueue(ctx, meta.Queue{Vhost: "/", Name: "new", Type: "classic", Durable: true, Node: "n1"}))
	must(m.DeleteExchange(ctx, "/", "x"))
	_, err := m.DeclareExchange(ctx, meta.Exchange{Vhost: "/", Name: "y", Type: "fanout", Durable: true})
	must(err)
	must(m.PutBinding(ctx, meta.Binding{Vhost: "/", Source: "y", Destination: "keep", DestinationType: "queue"}))
	if _, err := v.Queue(t.Context(), "drop", 0); err != nil {
		t.Fatalf("before the reset the vhost still has drop: %v", err)
	}
	v.onEvent(meta.Event{Kind: meta.Reset})

	checks := []struct {
		name string
		ok   func() bool
	}{
		{"deleted queue gone", func() bool { _, err := v.Queue(t.Context(), "drop", 0); return errors.Is(err, ErrNotFound) }},
		{"new queue open", func() bool { q, err := v.Queue(t.Context(), "new", 0); return err == nil && q != nil }},
		{"kept queue open", func() bool { _, err := v.Queue(t.Context(), "keep", 0); return err == nil }},
		{"deleted exchange gone", func() bool { _, err := v.Exchange("x"); return errors.Is(err, ErrNotFound) }},
		{"new exchange routes to its binding", func() bool {
			qs, err := v.Route(t.Context(), "y", "", nil, nil)
			return err == nil && len(qs) == 1 && qs[0].Info().Name == "keep"
		}},
	}
	for _, c := range checks {
		if !c.ok() {
			t.Errorf("after reset: %s: no", c.name)
		}
	}
}
