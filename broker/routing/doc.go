// Package routing holds a vhost's exchanges and bindings and routes messages
// to queue names. It does no I/O.
//
// Concurrency: Route is lock-free. It reads an immutable snapshot held in an
// atomic.Pointer; writers (DeclareExchange, DeleteExchange, Bind, BindAll,
// Unbind, RemoveQueue) serialize on the Table's mutex, copy the exchange
// states they change (copy-on-write) and publish a new snapshot. Changes are
// rare, routing is per message. The set of queue names known to the default
// exchange is a sync.Map (AddQueue is cheap, and Route reads it without a
// lock); it is the only state outside the snapshot.
//
// Per exchange the snapshot holds a structure shaped for its type: a map
// from key to destinations (direct), a list (fanout), a trie over key words
// with separate "*" and "#" edges (topic: a route costs the depth of the key,
// not the number of bindings), and pre-parsed x-match modes (headers).
//
// Semantics follow RabbitMQ: the default exchange routes a key to the queue of
// that name; routing keys are split on '.', with "" being zero words ("#"
// matches it, "*" does not); exchange-to-exchange bindings are followed once
// per exchange, so cycles are safe; an exchange whose bindings matched nothing
// hands the message to its alternate exchange; destinations are deduplicated.
// An auto-delete exchange is deleted when it loses its last binding as a
// source (Unbind, RemoveQueue, DeleteExchange of its destination), and the
// variants UnbindAutoDelete, RemoveQueue and DeleteExchangeCascade report
// which, so durable ones can be forgotten in the metadata store too.
//
// Route does not allocate for direct, fanout and topic exchanges reaching up
// to 16 queues when dst has the capacity; past that it deduplicates with a
// set.
package routing
