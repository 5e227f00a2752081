package vhost

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
)

// unreachableRemote is the twin of forward.Client for an owner none of
// whose calls succeed: every proxy's Delete fails as forward's does when
// its call cannot reach the node (NOT_FOUND, home node down or
// inaccessible).
type unreachableRemote struct{ deletes atomic.Int32 }

func (r *unreachableRemote) Queue(info queue.Info, node string) queue.Queue {
	return unreachableQueue{info: info, node: node, r: r}
}

type unreachableQueue struct {
	queue.Queue // not called
	info        queue.Info
	node        string
	r           *unreachableRemote
}

func (q unreachableQueue) Info() queue.Info { return q.info }

func (q unreachableQueue) Delete(context.Context, bool, bool) (int, error) {
	q.r.deletes.Add(1)
	return 0, errorf(ErrNotFound, "home node '%s' of queue '%s' in vhost '/' is down or inaccessible", q.node, q.info.Name)
}

// queue.delete of a queue on another node deletes its record without
// the owner only when the transport reports that node down: a call that
// fails while the node is reported up (a link reset, a timeout) is asked
// again and answered 404, and the queue (with its consumers, messages and
// if-unused) is left to its owner.
func TestDeleteOfARemoteQueueForcesOnlyWhenItsNodeIsReportedDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		down     bool
		ifUnused bool
		kept     bool
		calls    int32
	}{
		{name: "node up, call fails", down: false, ifUnused: true, kept: true, calls: 2},
		{name: "node up, plain delete", down: false, kept: true, calls: 2},
		{name: "node reported down", down: true, ifUnused: true, kept: false, calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, err := meta.OpenLocal(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			if err := m.PutVhost(ctx, meta.Vhost{Name: "/"}); err != nil {
				t.Fatal(err)
			}
			remote := &unreachableRemote{}
			var id atomic.Uint64
			v, err := Open(ctx, Config{Name: "/", Node: "n1", Dir: t.TempDir(), Meta: m, Remote: remote,
				NewMessageID: func() uint64 { return id.Add(1) },
				NodeDown:     func(node string) bool { return tc.down && node == "n2" }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = v.Close(context.Background()) })
			if err := m.PutQueue(ctx, meta.Queue{Vhost: "/", Name: "far", Type: "classic", Durable: true, Node: "n2"}); err != nil {
				t.Fatal(err)
			}
			_, err = v.DeleteQueue(ctx, "far", QueueDeleteOptions{IfUnused: tc.ifUnused})
			recorded := slices.ContainsFunc(m.Queues("/"), func(q meta.Queue) bool { return q.Name == "far" })
			if recorded != tc.kept {
				t.Fatalf("delete: %v; record kept %v, want %v", err, recorded, tc.kept)
			}
			if tc.kept && !errors.Is(err, ErrNotFound) {
				t.Fatalf("delete while the node is up: %v, want NOT_FOUND (home node down or inaccessible)", err)
			}
			if !tc.kept && err != nil {
				t.Fatalf("delete of a down node's queue: %v", err)
			}
			if got := remote.deletes.Load(); got != tc.calls {
				t.Errorf("calls to the owner: %d, want %d", got, tc.calls)
			}
		})
	}
}
