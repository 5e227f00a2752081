package vhost

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
)

// openVhost runs vhost "/" of node n1 on a real meta.Local in a temp dir.
func openVhost(t *testing.T, types QueueTypes) (*Vhost, *meta.Local) {
	t.Helper()
	ctx := context.Background()
	m, err := meta.OpenLocal(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.PutVhost(ctx, meta.Vhost{Name: "/"}); err != nil {
		t.Fatal(err)
	}
	var id atomic.Uint64
	v, err := Open(ctx, Config{Name: "/", Node: "n1", Dir: t.TempDir(), Meta: m, QueueTypes: types, NewMessageID: func() uint64 { return id.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close(context.Background()) })
	return v, m
}

// x-queue-type picks the opener registered for it (here classic's is
// replaced, as quorum's will be); a type with none is refused with
// RabbitMQ's precondition, and nothing is recorded.
func TestQueueTypeRegistry(t *testing.T) {
	var custom atomic.Int32
	types := DefaultQueueTypes()
	types["classic"] = QueueType{Open: func(ctx context.Context, v *Vhost, info queue.Info, args queue.Args) (queue.Queue, error) {
		custom.Add(1)
		return openClassic(ctx, v, info, args)
	}}
	delete(types, "stream")
	cases := []struct {
		typ     string
		wantErr string // "" opens
	}{
		{"classic", ""},
		{"stream", "queue type 'stream' is not supported by this node yet"},
		{"quorum", "queue type 'quorum' is not supported by this node yet"},
		{"nonsense", "invalid arg 'x-queue-type': nonsense"},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			v, m := openVhost(t, types)
			q, created, err := v.DeclareQueue(context.Background(), QueueDecl{Name: "q", Durable: true, Args: map[string]any{"x-queue-type": c.typ}})
			if c.wantErr != "" {
				if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("declare: %v; want PRECONDITION_FAILED %q", err, c.wantErr)
				}
				if qs := m.Queues("/"); len(qs) != 0 {
					t.Fatalf("a refused type was recorded: %+v", qs)
				}
				return
			}
			if err != nil || !created || q.Info().Type != c.typ {
				t.Fatalf("declare: %v, created %v; want a new %s queue", err, created, c.typ)
			}
		})
	}
	if custom.Load() != 1 {
		t.Fatalf("the registered classic opener ran %d times, want 1", custom.Load())
	}
}

// A queue placed on another node is in routing and keeps its name, and
// every local use answers ErrRemote naming the node; the local queues a
// route reaches still get the message's queues.
func TestRemoteQueue(t *testing.T) {
	ctx := context.Background()
	v, m := openVhost(t, nil)
	if err := m.PutQueue(ctx, meta.Queue{Vhost: "/", Name: "far", Type: "classic", Durable: true, Node: "n2"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.DeclareQueue(ctx, QueueDecl{Name: "near", Durable: true}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"far", "near"} {
		if err := m.PutBinding(ctx, meta.Binding{Vhost: "/", Source: "amq.fanout", Destination: name, DestinationType: "queue"}); err != nil {
			t.Fatal(err)
		}
	}
	uses := []struct {
		name string
		use  func() error
	}{
		{"Queue", func() error { _, err := v.Queue(t.Context(), "far", 0); return err }},
		{"passive declare", func() error { _, _, err := v.DeclareQueue(ctx, QueueDecl{Name: "far", Passive: true}); return err }},
		{"declare", func() error { _, _, err := v.DeclareQueue(ctx, QueueDecl{Name: "far", Durable: true}); return err }},
		{"delete if-empty", func() error { _, err := v.DeleteQueue(ctx, "far", QueueDeleteOptions{IfEmpty: true}); return err }},
		{"route", func() error {
			qs, err := v.Route(t.Context(), "amq.fanout", "", nil, nil)
			if len(qs) != 1 || qs[0].Info().Name != "near" {
				t.Errorf("route reached %d local queues, want near only", len(qs))
			}
			return err
		}},
	}
	for _, u := range uses {
		if err := u.use(); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "'n2'") {
			t.Errorf("%s: %v; want ErrRemote naming n2", u.name, err)
		}
	}
	if _, err := v.QueueRecord(t.Context(), "far", 0); err != nil {
		t.Errorf("QueueRecord: %v", err)
	}
	for _, q := range v.Queues() {
		if q.Info().Name == "far" {
			t.Error("a queue of another node is listed as held here")
		}
	}
	// A delete without conditions is a metadata write: it goes.
	if _, err := v.DeleteQueue(ctx, "far", QueueDeleteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Queue(t.Context(), "far", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v, want NOT_FOUND", err)
	}
}
