package forward

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/queue"
)

// A node of another release fails loudly, never applying part of a
// request: acknowledgements in the settle layout of before (version 1,
// one run) are refused with FailedPrecondition naming both versions, and
// the owner's queue settles nothing; the same acks in this layout settle.
func TestSettleOfAnOlderLayoutIsRefusedLoudly(t *testing.T) {
	_, nw, owner, q := consumeSetup(t)
	owner.add(2)
	cl := &client{}
	cl.reading.Store(true)
	if err := q.Consume(context.Background(), cl, queue.ConsumeOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "both messages received", func() bool { return len(cl.seqs()) == 2 })
	old := appendSeqs(append([]byte{1}, appendQueueRef(nil, "/", "q")[1:]...), settleAck, cl.seqs())
	_, err := nw.Call(context.Background(), "b", methodSettle, old)
	want := "forward.settle version 1 not understood (this node speaks 2)"
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Fatalf("settle of version 1: %v, want FailedPrecondition %q", err, want)
	}
	settled := func() int {
		owner.memQueue.mu.Lock()
		defer owner.memQueue.mu.Unlock()
		return len(owner.settled)
	}
	if n := settled(); n != 0 {
		t.Fatalf("the owner settled %d messages from a request it does not understand", n)
	}
	q.Ack(cl.seqs())
	q.waitSettled(context.Background())
	if n := settled(); n != 2 {
		t.Fatalf("%d of 2 settled in this node's layout", n)
	}
}

// Every forwarded request of a version this node does not speak is
// refused with FailedPrecondition naming the method and both versions,
// on the owner and on a consumer's node alike.
func TestEveryRequestOfAnotherVersionIsRefused(t *testing.T) {
	hub := transport.NewInmemHub()
	owner := &memQueue{info: queue.Info{Vhost: "/", Name: "q"}}
	Serve(hub.Network("b"), &memLocal{qs: map[string]*memQueue{"//q": owner}}, nil, nil)
	c := NewClient(Config{Network: hub.Network("a")})
	t.Cleanup(c.Close)
	req := append([]byte{99}, appendQueueRef(nil, "/", "q")[1:]...)
	for _, tc := range []struct{ from, to, method string }{
		{"a", "b", methodPublish}, {"a", "b", methodStats}, {"a", "b", methodGet}, {"a", "b", methodSettle},
		{"a", "b", methodPurge}, {"a", "b", methodDelete}, {"a", "b", methodConsume}, {"a", "b", methodCancel},
		{"a", "b", methodCredit}, {"b", "a", methodDeliver},
	} {
		t.Run(tc.method, func(t *testing.T) {
			_, err := hub.Network(tc.from).Call(context.Background(), tc.to, tc.method, req)
			want := fmt.Sprintf("%s version 99 not understood (this node speaks %d)", tc.method, requestVersion(tc.method))
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
				t.Fatalf("%v, want FailedPrecondition %q", err, want)
			}
		})
	}
}
