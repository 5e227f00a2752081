package meta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func openT(t *testing.T, dir string) *Local {
	t.Helper()
	l, err := OpenLocal(context.Background(), dir)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fill writes one record of every kind and returns what it wrote.
func fill(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	ra := false
	must(t, s.PutVhost(ctx, Vhost{Name: "/", Description: "default", Tags: []string{"a"}, DefaultQueueType: "quorum",
		Storage: StorageSettings{QueueVersion: 1, EmbedMessagesBelow: 1024, StreamReadAhead: &ra, StreamReadAheadLimit: 8192}}))
	must(t, s.PutVhost(ctx, Vhost{Name: "other"}))
	h, err := HashPassword("secret")
	must(t, err)
	must(t, s.PutUser(ctx, User{Name: "alice", PasswordHash: h, HashingAlgorithm: "rabbit_password_hashing_sha256", Tags: []string{"administrator"}}))
	must(t, s.PutPermission(ctx, Permission{User: "alice", Vhost: "/", Configure: ".*", Write: "^amq\\.", Read: ""}))
	must(t, s.PutPolicy(ctx, Policy{Vhost: "/", Name: "ttl", Pattern: "^t\\.", ApplyTo: "queues", Priority: 3, Definition: map[string]any{"message-ttl": int64(5000), "queue-version": int64(2)}}))
	must(t, s.PutExchange(ctx, Exchange{Vhost: "/", Name: "orders", Type: "topic", Durable: true, Arguments: map[string]any{"alternate-exchange": "ae"}}))
	must(t, s.PutExchange(ctx, Exchange{Vhost: "/", Name: "ae", Type: "fanout", Durable: true}))
	must(t, s.PutQueue(ctx, Queue{Vhost: "/", Name: "q1", Type: "classic", Durable: true, Arguments: map[string]any{"x-max-length": int32(10)}}))
	must(t, s.PutQueue(ctx, Queue{Vhost: "other", Name: "q1", Type: "stream", Durable: true}))
	must(t, s.PutBinding(ctx, Binding{Vhost: "/", Source: "orders", Destination: "q1", DestinationType: "queue", RoutingKey: "eu.#"}))
	must(t, s.PutBinding(ctx, Binding{Vhost: "/", Source: "orders", Destination: "ae", DestinationType: "exchange", RoutingKey: "x", Arguments: map[string]any{"k": "v"}}))
	must(t, s.PutNode(ctx, Node{Name: "warren@n1", Address: "n1.warren:25672"}))
	must(t, s.PutNode(ctx, Node{Name: "warren@n2", Address: "10.0.0.2:25672"}))
}

type dump struct {
	Vhosts      []Vhost
	Users       []User
	Permissions []Permission
	Policies    []Policy
	Exchanges   []Exchange
	Queues      []Queue
	Bindings    []Binding
	Nodes       []Node
}

func dumpOf(s Store) dump {
	return dump{s.Vhosts(), s.Users(), s.Permissions(), s.Policies(""), s.Exchanges(""), s.Queues(""), s.Bindings(""), s.Nodes()}
}

func TestReopenKeepsEveryKind(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir)
	fill(t, l)
	before := dumpOf(l)
	must(t, l.Close())

	r := openT(t, dir)
	after := dumpOf(r)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed across reopen:\nbefore %+v\nafter  %+v", before, after)
	}
	if len(after.Vhosts) != 2 || len(after.Users) != 1 || len(after.Permissions) != 1 || len(after.Policies) != 1 ||
		len(after.Exchanges) != 2 || len(after.Queues) != 2 || len(after.Bindings) != 2 || len(after.Nodes) != 2 {
		t.Fatalf("unexpected counts: %+v", after)
	}
	v, ok := r.Vhost("/")
	if !ok || v.Storage.QueueVersion != 1 || v.Storage.StreamReadAhead == nil || *v.Storage.StreamReadAhead {
		t.Fatalf("vhost storage settings lost: %+v", v)
	}
	u, _ := r.User("alice")
	if !u.CheckPassword("secret") || u.CheckPassword("wrong") {
		t.Fatal("password hash did not survive reopen")
	}
	// Whole numbers in arguments come back as integers.
	if got := r.Queues("/")[0].Arguments["x-max-length"]; got != int64(10) {
		t.Fatalf("x-max-length after reopen = %#v, want int64(10)", got)
	}
	if p, ok := r.Permission("/", "alice"); !ok || p.Write != "^amq\\." {
		t.Fatalf("permission = %+v %v", p, ok)
	}

	// Deletes are durable too.
	ctx := context.Background()
	must(t, r.DeleteBinding(ctx, Binding{Vhost: "/", Source: "orders", Destination: "q1", DestinationType: "queue", RoutingKey: "eu.#"}))
	must(t, r.DeletePolicy(ctx, "/", "ttl"))
	must(t, r.DeletePermission(ctx, "/", "alice"))
	must(t, r.DeleteQueue(ctx, "other", "q1"))
	must(t, r.DeleteUser(ctx, "alice"))
	must(t, r.DeleteNode(ctx, "warren@n2"))
	must(t, r.Close())
	r2 := openT(t, dir)
	if got := dumpOf(r2); len(got.Bindings) != 1 || len(got.Policies) != 0 || len(got.Permissions) != 0 || len(got.Queues) != 1 || len(got.Users) != 0 || len(got.Nodes) != 1 {
		t.Fatalf("deletes lost across reopen: %+v", got)
	}
}

func TestValidation(t *testing.T) {
	l := openT(t, t.TempDir())
	ctx := context.Background()
	tests := []struct {
		name string
		err  error
		do   func() error
	}{
		{"vhost without name", ErrInvalid, func() error { return l.PutVhost(ctx, Vhost{}) }},
		{"bad queue version", ErrInvalid, func() error { return l.PutVhost(ctx, Vhost{Name: "v", Storage: StorageSettings{QueueVersion: 3}}) }},
		{"bad default queue type", ErrInvalid, func() error { return l.PutVhost(ctx, Vhost{Name: "v", DefaultQueueType: "lazy"}) }},
		{"queue in missing vhost", ErrNotFound, func() error { return l.PutQueue(ctx, Queue{Vhost: "nope", Name: "q"}) }},
		{"permission of missing user", ErrNotFound, func() error { return l.PutPermission(ctx, Permission{User: "x", Vhost: "/"}) }},
		{"delete missing vhost", ErrNotFound, func() error { return l.DeleteVhost(ctx, "nope") }},
		{"delete missing user", ErrNotFound, func() error { return l.DeleteUser(ctx, "nope") }},
	}
	for _, tt := range tests {
		if err := tt.do(); !errors.Is(err, tt.err) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.PutVhost(cctx, Vhost{Name: "v"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	must(t, l.Close())
	if err := l.PutVhost(ctx, Vhost{Name: "v"}); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
}

func TestDeleteVhostCascades(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir)
	fill(t, l)
	var events []Event
	cancel := l.Subscribe(func(e Event) { events = append(events, e) })
	must(t, l.DeleteVhost(context.Background(), "/"))
	cancel()
	must(t, l.PutVhost(context.Background(), Vhost{Name: "after-cancel"}))
	if len(events) != 1 || events[0].Kind != VhostDeleted || events[0].Vhost != "/" {
		t.Fatalf("events = %+v, want one VhostDeleted", events)
	}
	check := func(s Store) {
		t.Helper()
		if len(s.Policies("/"))+len(s.Exchanges("/"))+len(s.Queues("/"))+len(s.Bindings("/")) != 0 {
			t.Fatalf("vhost contents left: %+v", dumpOf(s))
		}
		if _, ok := s.Permission("/", "alice"); ok {
			t.Fatal("permission left")
		}
		if len(s.Queues("other")) != 1 {
			t.Fatal("other vhost's queue deleted")
		}
		if _, ok := s.User("alice"); !ok {
			t.Fatal("user deleted with a vhost")
		}
	}
	check(l)
	must(t, l.Close())
	check(openT(t, dir))

	// Deleting an exchange drops bindings from and to it; a queue, to it.
	l2 := openT(t, t.TempDir())
	fill(t, l2)
	must(t, l2.DeleteExchange(context.Background(), "/", "ae"))
	if bs := l2.Bindings("/"); len(bs) != 1 || bs[0].Destination != "q1" {
		t.Fatalf("bindings after exchange delete: %+v", bs)
	}
	must(t, l2.DeleteQueue(context.Background(), "/", "q1"))
	if bs := l2.Bindings("/"); len(bs) != 0 {
		t.Fatalf("bindings after queue delete: %+v", bs)
	}
}

func TestSubscribeOrder(t *testing.T) {
	l := openT(t, t.TempDir())
	var kinds []EventKind
	l.Subscribe(func(e Event) { kinds = append(kinds, e.Kind) })
	fill(t, l)
	want := []EventKind{VhostPut, VhostPut, UserPut, PermissionPut, PolicyPut, ExchangePut, ExchangePut, QueuePut, QueuePut, BindingPut, BindingPut, NodePut, NodePut}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
}

func logSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, logName))
	must(t, err)
	return fi.Size()
}

func TestTornTailIsCut(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		tail func(rec []byte) []byte
	}{
		{"half a record", func(rec []byte) []byte { return rec[:len(rec)/2] }},
		{"header only", func(rec []byte) []byte { return rec[:recordHeader] }},
		{"few bytes", func(rec []byte) []byte { return rec[:3] }},
		{"bad checksum", func(rec []byte) []byte {
			bad := append([]byte(nil), rec...)
			bad[len(bad)-2] ^= 0xff
			return bad
		}},
		{"zero length", func([]byte) []byte { return make([]byte, 16) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, dir)
			must(t, l.PutVhost(ctx, Vhost{Name: "/"}))
			must(t, l.PutQueue(ctx, Queue{Vhost: "/", Name: "kept"}))
			must(t, l.Close())
			good := logSize(t, dir)

			rec, err := encodeRecord(Command{Op: OpPutQueue, Queue: &Queue{Vhost: "/", Name: "torn"}})
			must(t, err)
			f, err := os.OpenFile(filepath.Join(dir, logName), os.O_APPEND|os.O_WRONLY, 0)
			must(t, err)
			_, err = f.Write(tt.tail(rec))
			must(t, err)
			must(t, f.Close())

			r := openT(t, dir)
			if qs := r.Queues("/"); len(qs) != 1 || qs[0].Name != "kept" {
				t.Fatalf("queues after torn tail: %+v", qs)
			}
			if got := logSize(t, dir); got != good {
				t.Fatalf("log size %d after open, want the tail cut to %d", got, good)
			}
			must(t, r.PutQueue(ctx, Queue{Vhost: "/", Name: "next"}))
			must(t, r.Close())
			if qs := openT(t, dir).Queues("/"); len(qs) != 2 {
				t.Fatalf("write after cut lost: %+v", qs)
			}
		})
	}
}

func TestCompaction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openT(t, dir)
	l.compactBytes = 4096
	must(t, l.PutVhost(ctx, Vhost{Name: "/"}))
	var peak, written int64
	for i := 0; i < 1000; i++ {
		before := logSize(t, dir)
		must(t, l.PutQueue(ctx, Queue{Vhost: "/", Name: fmt.Sprintf("q%04d", i), Durable: true, Arguments: map[string]any{"x-max-length": int64(i)}}))
		written += max(0, logSize(t, dir)-before)
		if i%10 != 1 {
			must(t, l.DeleteQueue(ctx, "/", fmt.Sprintf("q%04d", i-1)))
		}
		peak = max(peak, logSize(t, dir))
	}
	// 101 queues stay (a snapshot of ~10 KiB) out of ~200 KiB written.
	if peak > 32<<10 || written < 100<<10 {
		t.Fatalf("log grew to %d bytes of %d written: compaction did not keep it near the live state", peak, written)
	}
	if _, err := os.Stat(filepath.Join(dir, logName+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file left: %v", err)
	}
	before := dumpOf(l)
	must(t, l.Close())
	after := dumpOf(openT(t, dir))
	if !reflect.DeepEqual(before, after) || len(after.Queues) != 101 {
		t.Fatalf("compacted log reopened to %d queues (want 101), equal=%v", len(after.Queues), reflect.DeepEqual(before, after))
	}
}
