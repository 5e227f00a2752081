package transport

import (
	"context"

	"github.com/hashicorp/raft"
)

// Network is one node's link to the other nodes of its cluster, shared by
// every Raft group on the node and by the node-level calls (metadata
// writes forwarded to the leader, forwarded client traffic).
//
// Names: a node is known by its stable node name (cluster.node_name), never
// by an address. The raft.ServerAddress a group's transport takes and gives
// is the node name too, so a Raft configuration survives address changes;
// the Network resolves a name to a dial address itself.
//
// Errors: an error that crosses a node boundary is a gRPC status error.
// Call returns the handler's status (status.Code(err) is the handler's code,
// status.Convert(err).Message() its message); a handler's error that is not
// a status arrives as codes.Unknown with its text. A peer that cannot be
// reached gives codes.Unavailable; a call whose context ends gives
// codes.Canceled or codes.DeadlineExceeded. The in-memory twin behaves the
// same, so callers may switch on codes in fast tests.
//
// Concurrency: every method is safe for concurrent use. Handlers run on the
// Network's goroutines, any number at once; they must honour ctx.
type Network interface {
	// Node is this node's name.
	Node() string
	// Group returns the raft.Transport of the Raft group id on this node:
	// its RPCs go to the group of the same id on the target node. Calling
	// Group twice with one id before closing the first returns the same
	// transport. An RPC for a group the receiving node has not opened is
	// answered with codes.Unavailable (Raft retries it).
	Group(id string) GroupTransport
	// Call sends req to the handler of method on node and returns its
	// answer. Calling this node's own name runs the handler in place.
	Call(ctx context.Context, node, method string, req []byte) ([]byte, error)
	// Send is Call without a goroutine waiting: done gets the answer (or
	// the failure, as Call returns it), once, on a goroutine of the
	// Network, and must not block; ctx bounds the call. An error from Send
	// itself (nothing was sent: no such peer, a closed Network, too big a
	// request) means done is not called. The requests Sent to one node, one
	// Send after another's return, reach it in that order, and a handler
	// registered with HandleOrdered starts them in that order: a caller that
	// serializes its Sends gets ordered calls with many answers under way.
	// A request lost with a broken connection fails; the ones after it may
	// still arrive.
	Send(ctx context.Context, node, method string, req []byte, done func(resp []byte, err error)) error
	// Handle registers h for method, replacing any earlier handler; calls
	// of a method without one fail with codes.Unimplemented.
	Handle(method string, h Handler)
	// HandleOrdered registers s for method (replacing any earlier
	// handler): the calls of method from one node start one at a time, in
	// the order that node Sent them, and are answered when s has their
	// answer called, in any order. A start must not block: it runs on the
	// goroutine that reads the peer's calls, holding up all it sends there.
	HandleOrdered(method string, s Starter)
	// HandleInline registers h for method (replacing any earlier
	// handler): the calls of method from one node run one at a time, in
	// the order that node Sent them, on the goroutine that reads the
	// peer's calls, and are answered at once, with no goroutine started
	// for them. h must not block: it holds up all the calls the peer
	// sends (and, to a peer without call lanes, its Raft appends). ctx
	// ends with the peer's connection.
	HandleInline(method string, h Handler)
	// Watch calls fn whenever this node's view of a peer changes: up false
	// when the peer became unreachable (its connection broke or was
	// refused, it closed), true when it is reachable again. It is the
	// per-node failure signal: one event per peer, not per group. Calls
	// come one at a time, in order, on a goroutine of the Network; stop
	// ends them.
	Watch(fn func(node string, up bool)) (stop func())
	// Close closes every group transport and connection; calls in flight
	// fail with codes.Unavailable.
	Close() error
}

// Immediate marks ctx for a Send (or Call) that never waits for room in
// the stream's queue: the request is queued past the limit the Network
// otherwise holds senders at. It is for callers that bound their calls in
// flight themselves and must not block: a done callback (on a stream's
// reader), a handler registered with HandleInline, a queue's loop.
func Immediate(ctx context.Context) context.Context {
	return context.WithValue(ctx, immediateKey{}, true)
}

type immediateKey struct{}

// immediate reports whether ctx was marked by Immediate.
func immediate(ctx context.Context) bool {
	v, _ := ctx.Value(immediateKey{}).(bool)
	return v
}

// GroupTransport is one Raft group's view of the Network.
type GroupTransport interface {
	raft.Transport
	raft.WithClose
	raft.WithPreVote
}

// Handler answers a Call. from is the calling node's name. req is the
// handler's to keep (what it decodes may alias it): the Network does not
// use it again. A call to this node itself runs its handler on the
// caller's bytes, so a caller never changes a request it Sent or Called
// to its own node; one to another node it may reuse once answered (the
// peer decoded its own copy). The same holds for a Starter's req.
type Handler func(ctx context.Context, from string, req []byte) ([]byte, error)

// Starter starts a Call (HandleOrdered) without blocking and has answer
// called once with the call's answer: before it returns or later, from
// any goroutine (answer does not block); ctx lasts until then. An error
// from the start itself is the call's answer, and answer is not called.
// A start whose answer comes from a goroutine that already runs (a
// queue's loop confirming messages) needs no goroutine of its own.
type Starter func(ctx context.Context, from string, req []byte, answer func([]byte, error)) error

// Waiting is the Starter of a start that returns how to wait for its
// answer: the wait runs on a goroutine of its own.
func Waiting(start func(ctx context.Context, from string, req []byte) (wait func() ([]byte, error), err error)) Starter {
	return func(ctx context.Context, from string, req []byte, answer func([]byte, error)) error {
		wait, err := start(ctx, from, req)
		if err != nil {
			return err
		}
		go func() { answer(wait()) }()
		return nil
	}
}
