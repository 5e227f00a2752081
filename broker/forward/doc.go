// Package forward lets any node serve any client of a queue another node
// holds. A node routes a publish itself (every node has the same routing
// table, a projection of the metadata); where a route reaches a queue the
// metadata places on another node, the vhost holds a proxy queue.Queue
// (Client.Queue) in its place, so the protocols' batching, confirms,
// mandatory returns and flow control work on it unchanged. The serving
// side (Serve) answers the calls on the owning node with its local queue.
//
// Publishes: a proxy hands its batch to its node's sender (one per
// destination node, shared by every proxy of that node), which sends what
// is queued in one node-level call ("forward.publish"), up to
// Config.MaxInFlight calls in flight per node: messages that queue up
// travel together, never one call each. Order: one goroutine at a time
// sends a node's calls (transport's Send, in the order their messages were
// queued) and the owner starts them in that order (HandleOrdered) while
// their confirms are awaited concurrently, so a channel's messages reach
// their queue in the order it published them, with no wait for a call
// that never comes (a call lost with a broken link fails; the ones after
// it go on). A start runs on the transport's reader of the peer's stream
// and never waits: a queue that is not ready (its open under way, the
// node's vhosts being started) gets its group, and every later group
// from that node, published by a goroutine that waits for it with the
// call's context, in order (publish_owner.go, Local's LocalNow). The owner
// publishes them into its
// queues with a new message id of its own and answers once every one is
// confirmed there, from the goroutine that confirms the last one (no
// goroutine a call waits; one does while a queue is overloaded, its flow
// control holding the answer) (after fsync for a persistent message on a durable
// queue; the messages of a call to one queue alias its request, and with
// several queues each queue's messages are copied into one buffer of
// their own, so a message a queue keeps in memory pins that queue's part
// of the call, not the whole request); the answer's per-message
// verdicts become the publishers' confirms. A call that fails (the owner down or unreachable, the queue
// gone) nacks every message it carried, with a warning naming the node:
// nothing is confirmed that the owner did not confirm, nothing is dropped
// silently. Throttle blocks a publisher while more than Config.HighWater
// bytes are outstanding to the node (the owner's own queue throttles its
// handler, so its back-pressure reaches the publisher).
//
// Other operations are one Call each: stats (queue.declare-ok counts),
// basic.get, purge and delete (the owner's vhost applies if-unused and
// if-empty). A delivery's settlement (Ack, Requeue, Reject on the proxy)
// goes to the owner's queue with the owner's sequence numbers, without
// waiting: Sent from the settling goroutine (settle.go) and applied on
// the owner where the transport reads it (HandleInline), no goroutine
// started on either side.
//
// Consumers (consume.go): the proxy's Consume registers a consumer on the
// owner that sends its deliveries back in batches ("forward.deliver", up
// to maxDeliverCalls numbered calls in flight per consumer, Sent from the
// queue's loop or from the last call's answer; the consumer's node hands
// each batch to its client where the transport reads it, in their
// order). The owner keeps at most the consumer's prefetch (or
// defaultWindow) unsettled, plus, from a prefetch of readAheadMinPrefetch
// up, as much again read ahead (held on the consumer's node until the
// client's prefetch lets it through), and a settlement gives the credit
// back; with automatic acks, at most autoAckWindow (and
// autoAckWindowBytes) its node has not handed to the client yet, and that
// node gives the credit back as the client's socket takes them (in a deliver
// call's answer, or with "forward.credit"), so a client that does not
// read leaves the backlog in the owner's queue. The consumer's node down, or a
// delivery it refuses to take, cancels the consumer on the owner and
// requeues its unacked messages; the owner down cancels its consumers on
// the other nodes (basic.cancel for clients that asked for it). A stream
// is consumed on its own node only (its offsets do not cross yet):
// Consume of a stream's proxy is queue.ErrNotImplemented naming the node.
//
// Wire: messages cross in message.Message's own encoding; the framing is
// in wire.go, every decoder bounds-checked and fuzzed. Errors cross as gRPC
// status errors: the owner maps its errors to codes with Serve's toStatus,
// and a caller maps them back with Config.Errors (the vhost's FromStatus),
// keeping RabbitMQ's text. An owner that cannot be reached answers as
// RabbitMQ does: NOT_FOUND "home node 'N' of durable queue 'q' in vhost
// '/' is down or inaccessible".
//
// Every request but forward.cancelled starts with its layout's version
// (version.go); a node answers one of another version FailedPrecondition
// "forward.<method> version N not understood (this node speaks M)":
// nodes of different releases fail loudly, never apply part of a
// request. There is no compatibility between versions before the first
// release.
//
// Close (at the node's shutdown) ends the publish calls and settlements
// under way: what the owner has not confirmed is nacked, so is what is
// published after, and Close returns once their goroutines have ended.
//
// Deadlines: publish, settle and deliver calls are Sent Within the call
// timeout (transport.Within: the link's one timer fails them, none of
// their own), and the owner watches a publish call's context only where
// a goroutine waits for it (a queue overloaded or not found yet): where
// none does, the last confirm answers, also after the call ended (its
// caller failed it then). A timer a call took 6% of the brokers' CPU of
// a message forwarded.
//
// Concurrency: every exported method is safe for concurrent use. A
// proxy's Publish never blocks (it appends to its sender's queue under a
// mutex taken briefly); a publish call's confirms, a deliver call's and a
// settle call's answers are handled where the transport reads them
// (transport.Network.Send's done), and the deliveries and settlements
// that arrive are handled where they are read (HandleInline): none of
// them blocks, and the Sends made there and from a queue's loop are
// transport.Immediate (they never wait for room on the link; the calls
// in flight are bounded here: maxDeliverCalls a consumer,
// maxSettleCalls a proxy). On a Network whose readers say when they have
// handed over what they read (the GRPCNetwork's OnAnswersRead), a publish
// answer's confirms are left in the publisher's output
// (queue.DeferredConfirmer) and the reader writes them once it has handed
// over every answer it read, before it waits for the peer: the answers
// of one read usually make one write to a publisher, and no connection's
// writer goroutine is woken for them (a forwarded s5 took 8% less of the
// brokers' CPU a message).
// Lock order: sender.mu before Client.mu (a sender starts its goroutines
// through the Client), and so are sub.mu (a sub starts its credit call
// under it) and settler.mu (a settle call is counted under it). A
// remoteConsumer's mu and settler.mu are held while their calls are Sent
// (so they leave in order): the transport's locks come after them.
// heldPublishes.mu and deferredConfirms.mu are leaves; the queue is woken
// after a remoteConsumer's mu is released.
// The single-node path never reaches this package.
package forward
