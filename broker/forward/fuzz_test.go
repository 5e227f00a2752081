package forward

import (
	"context"
	"testing"

	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/queue"
)

// FuzzHandlers sends any bytes to every handler of the owner: a peer's
// request never panics or hangs it, and a malformed one is refused.
func FuzzHandlers(f *testing.F) {
	m := &message.Message{Exchange: "x", RoutingKey: "q", Body: []byte("hi")}
	f.Add(appendPublishes(nil, []item{{q: &Queue{info: queue.Info{Vhost: "/", Name: "q"}}, p: queue.Publish{Msg: m}}}))
	f.Add(appendQueueRef(nil, "/", "q"))
	f.Add(append(appendQueueRef(nil, "/", "q"), 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 5})
	f.Add(appendSeqs(appendSettleRef(nil, "/", "q"), settleAck, []uint64{1, 2}))
	f.Add(appendDeliveries(nil, 1, 0, []queue.Delivery{{Msg: m, Seq: 3}}))
	f.Add(appendCredit(nil, 1, 5))
	f.Add([]byte{publishVersion, 0, 1, '/', 0, 1, 'q', 0xff, 0xff, 0xff, 0xff})
	hub := transport.NewInmemHub()
	owner := &memQueue{info: queue.Info{Vhost: "/", Name: "q"}}
	Serve(hub.Network("b"), &memLocal{qs: map[string]*memQueue{"//q": owner}}, nil, nil)
	a := hub.Network("a")
	NewClient(Config{Network: a})
	f.Fuzz(func(t *testing.T, req []byte) {
		for _, method := range []string{methodPublish, methodStats, methodPurge, methodDelete, methodSettle, methodConsume, methodCancel, methodCredit} {
			_, _ = a.Call(context.Background(), "b", method, req)
		}
		// The consumer's side: deliveries and cancels from an owner.
		for _, method := range []string{methodDeliver, methodCancelled} {
			_, _ = hub.Network("b").Call(context.Background(), "a", method, req)
		}
		_, _ = decodeStats(req)
		_, _, _ = decodeDelivery(req)
		_, _ = decodeCount(req)
		_, _, _, _ = decodeDeliveries(req, nil)
		_, _, _ = decodeCredit(req)
	})
}
