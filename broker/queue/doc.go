// Package queue holds the queue types behind one interface: classic queues
// (one goroutine per queue over the store's queue index) and streams (a
// streamlog read by one goroutine per AMQP consumer); quorum queues come
// later. A queue knows nothing of sockets: channels hand it Publish batches
// and acks, and it hands Deliveries to Consumers.
//
// Concurrency contract: every Queue method is safe for concurrent use and none
// blocks on the queue's work except those taking a context (Consume, Get, Purge,
// Delete, Close), which wait for the queue goroutine's answer. Publish, Ack,
// Requeue, Reject, Cancel and Wake only enqueue a command: a channel never waits
// on a queue (flow control aside: Throttle blocks a publisher while the queue's
// inbox is over its high-water mark). Callbacks into Consumer and Confirmer run
// on the queue goroutine (a stream consumer's own goroutine for streams) and
// must not block; they must not call back into the same queue synchronously.
// Wake(c) names the consumer whose credit came back: a stream wakes only that
// consumer's goroutine, a classic queue takes a delivery turn.
package queue
