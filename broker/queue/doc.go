// Package queue holds the queue types behind one interface: classic queues
// (one goroutine per queue over the store's queue index) and streams (a
// streamlog read by one goroutine per AMQP consumer); quorum queues come
// later. A queue knows nothing of sockets: channels hand it Publish batches
// and acks, and it hands Deliveries to Consumers.
//
// Concurrency contract: every Queue method is safe for concurrent use and none
// blocks on the queue's work except those taking a context (Consume, Get, Purge,
// Delete, Close), which wait for the queue goroutine's answer. Publish, Ack,
// Requeue, Reject and Cancel only enqueue a command: a channel never waits on a
// queue (flow control aside: Throttle blocks a publisher while the queue's
// inbox is over its high-water mark). Callbacks into Consumer and Confirmer run
// on the queue goroutine (a stream consumer's own goroutine for streams) and
// must not block; they must not call back into the same queue synchronously.
// A classic queue's turns run one at a time under its turnMu: on its goroutine,
// or, for a lone message published into an idle queue (InlinePublisher), on
// the publisher's, whose caller therefore holds no lock those callbacks take.
// Wake(c) names the consumer whose credit came back: a classic queue takes a
// delivery turn; a stream delivers what is ready to c on the calling goroutine
// if c's goroutine is idle (it waits for credit), and signals that goroutine
// otherwise. So Wake's caller holds no lock that c's Deliver or Flush takes;
// the work is bounded by c's credit and never waits for the disk's tail. A
// stream hands a BatchConsumer its ready messages as one DeliverEach run.
//
// A classic queue writes a turn's messages through to its index before it
// delivers anything of the turn. When that write fails (a full disk), the
// turn's durable messages leave the queue and their publishers are nacked,
// so a nacked message is never delivered; transient ones that were only
// being spilled stay in memory. Deliveries to consumers that ack are
// recorded in the index (one status write per run of entries) before the
// turn flushes them to the socket, so after a crash only those come back
// redelivered. (A connection's writer busy with earlier output may send
// some of them sooner: a crash in that instant costs the mark, never the
// message; redelivered stays a hint, as in AMQP.)
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package queue
