package vhost

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/warrenmq/warren/broker/meta"
)

// BenchmarkDeclareExclusive: queue.declare of exclusive server-named queues
// on one node, and their deletes when the owner's connection closes (every
// 100). Each declare and delete is a meta.log record with an fsync; the
// classic queue's own index files cost more (created and fsynced even for
// a transient queue). It uses only API older trees have, so the same file
// measures before and after.
func BenchmarkDeclareExclusive(b *testing.B) {
	ctx := context.Background()
	m, err := meta.OpenLocal(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.PutVhost(ctx, meta.Vhost{Name: "/"}); err != nil {
		b.Fatal(err)
	}
	var id atomic.Uint64
	v, err := Open(ctx, Config{Name: "/", Dir: b.TempDir(), Meta: m, NewMessageID: func() uint64 { return id.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close(ctx)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := v.DeclareQueue(ctx, QueueDecl{Exclusive: true, AutoDelete: true, Owner: 1}); err != nil {
			b.Fatal(err)
		}
		if i%100 == 99 {
			v.ConnectionClosed(ctx, 1)
		}
	}
	v.ConnectionClosed(ctx, 1)
}

// BenchmarkDeclareExclusiveParallel is BenchmarkDeclareExclusive from
// several connections at once (what group commit would serve).
func BenchmarkDeclareExclusiveParallel(b *testing.B) {
	ctx := context.Background()
	m, err := meta.OpenLocal(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.PutVhost(ctx, meta.Vhost{Name: "/"}); err != nil {
		b.Fatal(err)
	}
	var id, conn atomic.Uint64
	v, err := Open(ctx, Config{Name: "/", Dir: b.TempDir(), Meta: m, NewMessageID: func() uint64 { return id.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close(ctx)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		owner := conn.Add(1)
		i := 0
		for pb.Next() {
			if _, _, err := v.DeclareQueue(ctx, QueueDecl{Exclusive: true, AutoDelete: true, Owner: owner}); err != nil {
				b.Error(err)
				return
			}
			if i++; i%100 == 0 {
				v.ConnectionClosed(ctx, owner)
			}
		}
		v.ConnectionClosed(ctx, owner)
	})
}
