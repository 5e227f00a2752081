package queue

import (
	"context"
	"errors"

	"github.com/warrenmq/warren/broker/message"
)

// Sentinel errors. Channels map them to AMQP reply codes.
var (
	ErrNotFound          = errors.New("queue: not found")
	ErrInUse             = errors.New("queue: in use")             // delete if-unused with consumers
	ErrNotEmpty          = errors.New("queue: not empty")          // delete if-empty with messages
	ErrExclusiveConsumer = errors.New("queue: exclusive consumer") // access-refused in AMQP
	ErrConsumersExist    = errors.New("queue: has consumers")      // exclusive consume on a queue with consumers
	ErrDeleted           = errors.New("queue: deleted")
	ErrInvalidArgument   = errors.New("queue: invalid argument") // precondition-failed
	ErrUnsupported       = errors.New("queue: not supported by this queue type")
	ErrStopped           = errors.New("queue: stopped")
	// ErrNotImplemented is what a queue type does not do at all (basic.get
	// or automatic acks on a stream): AMQP's not-implemented.
	ErrNotImplemented = errors.New("queue: not implemented")
)

// Publish is one message handed to a queue.
type Publish struct {
	Msg *message.Message
	// Confirm, when not nil, is told once the message is safe in this queue
	// (after fsync for a persistent message on a durable queue, at enqueue
	// otherwise), or refused (x-overflow reject-publish).
	Confirm Confirmer
	// Tag is the publisher's confirm sequence number, passed back to Confirm.
	Tag uint64
}

// Confirmer receives publisher confirms. Confirm is called from queue
// goroutines, possibly concurrently; it must not block, nor keep tags
// past the call (a queue passes one buffer's parts to its confirmers).
type Confirmer interface {
	Confirm(tags []uint64, ok bool)
}

// DeferredConfirmer is a Confirmer whose confirms can wait to be written:
// a goroutine that confirms several batches in a row (a cluster link's
// reader handing over the answers of forwarded publishes) calls
// ConfirmDeferred for each, and Flush is called once after them, before
// that goroutine waits for more, so the client gets them together. Until
// a Flush they may sit unsent. Flush may run on any goroutine,
// concurrently with ConfirmDeferred; neither blocks, and ConfirmDeferred
// keeps no tags past the call (as Confirm).
type DeferredConfirmer interface {
	Confirmer
	ConfirmDeferred(tags []uint64, ok bool)
	Flush()
}

// Delivery is one message handed to a consumer or returned by Get.
type Delivery struct {
	Msg         *message.Message
	Queue       Queue
	Seq         uint64 // the queue's id for the message: pass it to Ack/Requeue/Reject
	Redelivered bool
	// Remaining is the number of ready messages left (for basic.get-ok).
	Remaining int
}

// Consumer receives deliveries from a queue. Its methods are called from the
// queue goroutine (for a stream, also from Wake's caller) and must not block.
type Consumer interface {
	// Deliver hands over a message. It returns false, keeping nothing, when
	// the consumer has no credit (prefetch used up, connection output full);
	// the queue then skips it until Wake is called.
	Deliver(d Delivery) bool
	// NoAck reports whether deliveries are settled on send (basic.consume no-ack).
	NoAck() bool
	// Cancelled tells the consumer the queue cancelled it (queue deleted).
	Cancelled()
	// Flush is called after a batch of Deliver calls (a queue's turn, a
	// stream chunk) and before the queue waits for the consumer's credit:
	// a consumer may hold deliveries in its output buffer until then, so
	// one socket write carries the batch.
	Flush()
}

// FinalConsumer is an automatic-ack Consumer that, while its cancel is
// under way (basic.cancel), takes the deliveries its queue already
// counted as delivered to it but it refused so far (a queue on another
// node sent them there): it hands them to its client whatever its credit
// and output, before the cancel completes, or drops them if its channel
// is closing. Called at most once, from the canceller's goroutine.
type FinalConsumer interface {
	Consumer
	DeliverFinal(ds []Delivery)
}

// BatchConsumer is a Consumer that takes a run of deliveries at once: a
// queue that makes deliveries one after another without waiting (a
// stream reading its log) hands them over with one call, and the
// consumer takes its locks once per run instead of once per message.
type BatchConsumer interface {
	Consumer
	// DeliverEach takes deliveries from next while it has credit and
	// room, and stops when next returns nil. It calls next only when it
	// will take what next returns, so nothing is refused once made; the
	// *Delivery is the consumer's only during the call. It reports
	// whether it stopped for lack of credit or room (the queue then waits
	// for Wake, as after Deliver returned false). next must not call back
	// into the consumer.
	DeliverEach(next func() *Delivery) (refused bool)
}

// ConsumeOptions are basic.consume's options as a queue sees them.
type ConsumeOptions struct {
	Exclusive bool
	// Priority from the x-priority consumer argument.
	Priority int
	// Prefetch is the consumer's prefetch limit (basic.qos global=false),
	// 0 for none. Streams refuse consumers without one.
	Prefetch int
	// Args holds the remaining consumer arguments (e.g. x-stream-offset).
	Args map[string]any
}

// Stats is a snapshot of a queue's counters.
type Stats struct {
	Ready          int
	Unacked        int
	Consumers      int
	ReadyBytes     int64
	UnackedBytes   int64
	MemoryBytes    int64
	Published      uint64
	Delivered      uint64
	Acked          uint64
	ActiveConsumer bool // for single active consumer: whether one is active
}

// Info is how a queue was declared.
type Info struct {
	Vhost      string
	Name       string
	Type       string // classic, quorum, stream
	Durable    bool
	AutoDelete bool
	Exclusive  bool
	Args       map[string]any
}

// Queue is implemented by every queue type.
type Queue interface {
	Info() Info
	// Publish enqueues messages; it never blocks.
	Publish(batch []Publish)
	// Throttle blocks while the queue's inbox is over its high-water mark.
	Throttle(ctx context.Context) error
	// Ack settles delivered messages.
	Ack(seqs []uint64)
	// Requeue returns delivered messages to their place in the queue, marked redelivered.
	Requeue(seqs []uint64)
	// Reject discards delivered messages (dead-lettering them if configured).
	Reject(seqs []uint64)
	// Consume attaches a consumer.
	Consume(ctx context.Context, c Consumer, opts ConsumeOptions) error
	// Cancel detaches a consumer; its unacked deliveries stay unacked.
	Cancel(c Consumer)
	// Wake tells the queue consumer c may have credit again (nil: any of
	// its consumers, e.g. after a timer). A queue may wake only c, and may
	// call c's Deliver and Flush before returning: the caller holds no lock
	// they take.
	Wake(c Consumer)
	// Get takes one message (basic.get); ok is false when the queue is empty.
	Get(ctx context.Context, noAck bool) (d Delivery, ok bool, err error)
	// Purge removes every ready message and returns how many.
	Purge(ctx context.Context) (int, error)
	// Delete removes the queue and its files; it returns the number of
	// messages it held. Consumers are cancelled.
	Delete(ctx context.Context, ifUnused, ifEmpty bool) (int, error)
	// Stats is a snapshot of the counters; it never blocks on the queue goroutine.
	Stats() Stats
	// Close stops the queue goroutine, keeping its files (clean shutdown).
	Close(ctx context.Context) error
}

// InlinePublisher is a queue that can apply a publish on the caller's
// goroutine. A publisher that waits for each confirm sends one message at a
// time into an idle queue; waking the queue's goroutine for it costs more
// than the enqueue and delivery themselves.
type InlinePublisher interface {
	// PublishInline is Publish, except that the queue may apply the batch
	// on the caller's goroutine before returning: enqueue it, confirm it
	// where no fsync is due and deliver to consumers. enqueued, unless nil,
	// is called once the batch is in the queue (a Get or a consumer after
	// that finds it) and before any delivery of it: a publisher's confirms
	// given at enqueue go out then. The caller must hold no lock that a
	// Confirmer, a Consumer or enqueued takes.
	PublishInline(batch []Publish, enqueued func())
}
