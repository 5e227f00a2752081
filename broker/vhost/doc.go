// Package vhost is the runtime of one virtual host: its exchanges and
// bindings (a routing.Table), its queues, its storage (a store.VhostStore) and
// its effective storage settings. Protocol servers (AMQP, stream) and the HTTP
// API act on a vhost through this package.
//
// A projection of the metadata. Every exchange, queue and binding, durable
// or not, is a meta record; a vhost changes its routing table and its set
// of queues only in onEvent (the meta store's subscriber, filtered to this
// vhost) and in recover at Open. Declare, delete, bind and unbind check
// what they can against the vhost, then write the metadata and return once
// the store has applied the write and this node's handler has seen its
// event (meta.Store's contract): the caller then finds the queue open, the
// binding in the routing table, the deleted queue's files gone. A change
// another node writes arrives the same way. A queue or exchange declare is
// arbitrated by the state machine (meta.Store.DeclareQueue and
// DeclareExchange): of concurrent declares of one name with different
// arguments one creates, the others get PRECONDITION_FAILED with
// RabbitMQ's text; a redeclare of a queue the vhost has is checked here
// with the same function (meta.CheckQueueEquivalent) and writes nothing.
//
// A queue this node holds is opened off the store's apply goroutine: the
// handler records it (queue map and routing) at once and queues its open
// for the vhost's openers (opener.go): at most 16 goroutines, started only
// while opens are queued, taking them in the order they were recorded. So
// a follower applying a burst of declares neither creates their
// directories and files one after the other nor starts a goroutine per
// queue. The declare that wrote the record waits for the open before it
// answers (and reports, and undoes, an open that failed); a publish
// routed to it, a Queue lookup, a binding check, a redeclare and a delete
// wait for the open too (a delete, and LocalQueueContext, no longer than
// their context). Close waits for opens under way; opens still queued are
// not made (ErrClosed to their waiters, the record kept). Recovery at
// Open and a Reset's resync open synchronously. A crash before an open
// ended loses nothing: the record is durable in the metadata and recovery
// opens the queue.
//
// Placement: a queue record names the node that holds it (Config.Node). The
// vhost opens only its own node's queues, with the opener its type
// registers in QueueTypes (x-queue-type: classic, stream; quorum refused
// until it exists); a queue of another node is known to routing and kept as
// a record with a proxy from Config.Remote (package forward): Queue and
// Route give the proxy, so a publish reaches the owner and its confirms
// come back; a declare of it answers from the record with the owner's
// counts (NOT_FOUND "home node ... is down or inaccessible" when the owner
// does not answer); a delete goes to the owner, which checks the
// conditions. LocalQueue is the owner's side: only the queues held here
// (LocalQueueContext waits for an open under way until its context ends,
// LocalQueueIfOpen not at all, for a caller that must not block).
// Without Config.Remote, using a queue of another node is ErrRemote naming
// the node. Errors crossing nodes are gRPC status errors (ToStatus,
// FromStatus) carrying RabbitMQ's text.
// DropTransient, at node start, deletes the non-durable and exclusive queues
// a crash left in the metadata on this node; Transient is that one rule,
// which the cluster's metadata leader also applies to a node that has been
// down for a while (server's down-node sweep).
//
// A meta.Reset event (a replicated store installed a snapshot) resyncs
// the whole vhost from the store's reads. Events may repeat (a retried
// replicated write): every handler step is idempotent.
//
// Errors wrap the package's sentinel errors (ErrNotFound, ErrPrecondition,
// ErrResourceLocked, ErrAccessRefused, ErrNotAllowed, ErrRemote) with
// RabbitMQ's wording, e.g. "no queue 'q' in vhost '/'", so each protocol maps
// them to its codes; metadata refusals (*meta.Error) map through fromMeta.
//
// Authorization is the protocols' (they know the user), but what only a
// new queue or exchange needs is checked before it is recorded:
// QueueDecl.Authorize and ExchangeDecl.Authorize run, under no vhost lock,
// when the vhost does not have the name. A declare that races another of
// the same name may be authorized and then find the queue made; none
// creates one unauthorized.
//
// Lock order: meta's apply lock (held while subscribers run), then
// Vhost.projMu (the handler and recover, one at a time), then Vhost.mu
// (the queue map, taken briefly), then a queue's own locks. A queue is
// deleted under projMu, not under mu; it is opened under projMu (recover,
// resync) or on an opener under no vhost lock (an event), which takes mu
// only to record the result. Vhost.openMu (the queue of opens) is a leaf,
// taken under mu by the handler. A writer (declare, delete,
// bind, unbind, ConnectionClosed, an expired queue's delete) holds no vhost
// lock while it writes the metadata: the handler it waits for takes them.
// The handler never writes metadata. Queues call back into the vhost only
// through Host methods that do not block (Expired deletes on its own
// goroutine).
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package vhost
