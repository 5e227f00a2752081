// Package vhost is the runtime of one virtual host: its exchanges and
// bindings (a routing.Table), its queues, its storage (a store.VhostStore) and
// its effective storage settings. Protocol servers (AMQP, stream) and the HTTP
// API act on a vhost through this package; durable definitions are written to
// the meta store before they take effect, so a restart recovers them.
//
// Errors wrap the package's sentinel errors (ErrNotFound, ErrPrecondition,
// ErrResourceLocked, ErrAccessRefused, ErrNotAllowed) with RabbitMQ's wording,
// e.g. "no queue 'q' in vhost '/'", so each protocol maps them to its codes.
//
// Authorization is the protocols' (they know the user), but what only a
// new queue or exchange needs is checked at the moment of creation:
// QueueDecl.Authorize and ExchangeDecl.Authorize run under Vhost.mu, once
// the vhost knows the queue or exchange does not exist, so a concurrent
// declare cannot slip one past the check. They may read the meta store
// (the order Vhost.mu, then meta's lock, is the one PutQueue already
// takes) and must not call into the vhost.
//
// Lock order: Vhost.mu, then a queue's own locks (never the reverse: queues
// call back into the vhost only through Host methods that do not block).
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package vhost
