// Package routing holds a vhost's exchanges and bindings and routes messages
// to queue names. It does no I/O.
//
// Reads are lock-free: Route works on an immutable snapshot held in an
// atomic.Pointer. Writers (declare, delete, bind, unbind) serialize on a
// mutex, copy what they change and publish a new snapshot; they are rare,
// routing is per message. Topic bindings are kept in a trie per exchange so a
// topic route costs the depth of the key, not the number of bindings.
//
// Semantics follow RabbitMQ: the default exchange routes a key to the queue of
// that name; exchange-to-exchange bindings are followed once per exchange
// (cycles are safe); an alternate exchange receives what its exchange could
// not route; destinations are deduplicated.
package routing
