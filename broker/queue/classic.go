package queue

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/store"
)

// Host is what a queue needs from its vhost.
type Host interface {
	// DeadLetter routes dead-lettered messages (already carrying x-death and
	// their new routing key) through exchange; it must not block.
	DeadLetter(exchange string, msgs []*message.Message)
	// Expired asks the vhost to delete this queue (auto-delete, x-expires);
	// it must not block.
	Expired(q Queue)
	NewMessageID() uint64
}

// ClassicConfig configures a classic queue.
type ClassicConfig struct {
	Info           Info
	Args           Args
	Store          *store.VhostStore
	StoreOptions   store.Options
	MemoryMessages int
	Host           Host
	Log            *slog.Logger
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

const (
	inboxHighWater      = 4096
	inboxHighWaterBytes = 16 << 20
	// publishOverhead is what a queued publish costs beyond its body
	// (message header, props, slice entries), for inbox accounting.
	publishOverhead = 256
	windowBytes     = 32 << 20
)

// Classic is a classic queue: turns, one at a time, over an in-memory window
// of messages and a store.QueueIndex holding the rest.
type Classic struct {
	cfg  ClassicConfig
	info Info
	args Args
	log  *slog.Logger
	now  func() time.Time
	idx  *store.QueueIndex

	// Inbox: commands are appended under mu and taken whole by the loop.
	mu         sync.Mutex
	inbox      []cmd
	inboxBytes int64
	// inboxMsgs counts the messages of the inbox's publishes, turnMsgs those
	// of the turn under way: with sReady (updated at the end of a turn)
	// they are the backlog flow control looks at.
	inboxMsgs, turnMsgs int64
	drained             chan struct{} // closed at the end of a turn (the backlog changed); nil if nobody waits
	stopped             bool
	// turnMu is held while a turn runs: by the loop, or by a publisher
	// that runs its batch's turn itself (PublishInline). The loop takes
	// turnMu, then mu; PublishInline only tries turnMu while it holds mu.
	turnMu sync.Mutex
	signal chan struct{}
	done   chan struct{}

	// Counters readable without the loop.
	sReady, sUnacked, sConsumers   atomic.Int64
	sReadyBytes, sUnackedBytes     atomic.Int64
	sPublished, sDelivered, sAcked atomic.Uint64
	sActive                        atomic.Bool
	// lastDelivery is when the loop last delivered (Unix nanoseconds): flow
	// control holds publishers back only while consumers are taking messages.
	lastDelivery atomic.Int64

	// Owned by whoever holds turnMu (the loop, or PublishInline).
	st loopState
}

type qmsg struct {
	seq         uint64
	msg         *message.Message
	redelivered bool
	inIndex     bool
	// spilled: enqueued straight to disk (only the turn that enqueued it
	// holds it, to take it back if the write fails).
	spilled bool
}

type consumerState struct {
	c       Consumer
	opts    ConsumeOptions
	blocked bool
	flush   bool // got deliveries since its last Flush
	unacked int
}

type loopState struct {
	ready      []*qmsg // sorted by (priority desc, seq); ready[head:] are live
	head       int
	readyBytes int64
	// Messages only on disk: seqs >= diskFrom, diskCount of them.
	diskFrom    uint64
	diskCount   int
	diskBytes   int64
	nextSeq     uint64
	unacked     map[uint64]*unackedMsg
	unackedB    int64
	consumers   []*consumerState
	rr          int
	hadConsumer bool
	lastUsed    time.Time
	expiryTimer *time.Timer
	// toMark are the seqs of durable messages delivered this turn, to
	// record as delivered in the index (reused across turns).
	toMark []uint64
	// forgotten are the index entries of messages that left the queue this
	// turn without a consumer's ack (auto-ack deliveries, expiry, overflow),
	// durable and transient, acked in the index by ackForgotten in one
	// batch (reused across turns).
	forgotten, forgottenTransient []uint64
	// directConfirms is the turn's slice of confirms sent at enqueue
	// (reused across turns, emptied of its confirmers).
	directConfirms []Publish
}

type unackedMsg struct {
	m    *qmsg
	cons *consumerState
}

type cmdKind uint8

const (
	cPublish cmdKind = iota + 1
	cAck
	cRequeue
	cReject
	cConsume
	cCancel
	cWake
	cGet
	cPurge
	cDelete
	cClose
	cSynced
	cTouch
	cSetStorage
	cExpiresCheck
)

type cmd struct {
	kind     cmdKind
	pubs     []Publish
	seqs     []uint64
	consumer Consumer
	opts     ConsumeOptions
	noAck    bool
	ifUnused bool
	ifEmpty  bool
	storeOpt store.Options
	ctx      context.Context
	err      error
	reply    chan result
	enqueued func() // cPublish run inline: called once pubs are in the queue
}

type result struct {
	err error
	n   int
	d   Delivery
	ok  bool
}

// OpenClassic opens a classic queue and recovers its messages.
func OpenClassic(ctx context.Context, cfg ClassicConfig) (*Classic, error) {
	if cfg.MemoryMessages <= 0 {
		cfg.MemoryMessages = 2048
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Info.Type = "classic"
	q := &Classic{cfg: cfg, info: cfg.Info, args: cfg.Args, log: cfg.Log.With("queue", cfg.Info.Name), now: cfg.Now, signal: make(chan struct{}, 1), done: make(chan struct{})}
	idx, rec, err := cfg.Store.OpenQueue(ctx, cfg.Info.Name, cfg.StoreOptions)
	if err != nil {
		return nil, fmt.Errorf("queue %q: open storage: %w", cfg.Info.Name, err)
	}
	if !cfg.Info.Durable && rec.Count > 0 {
		// A transient queue starts empty.
		if err := idx.Purge(); err != nil {
			return nil, fmt.Errorf("queue %q: clear storage: %w", cfg.Info.Name, err)
		}
		rec.Count, rec.Bytes = 0, 0
	}
	q.idx = idx
	q.st = loopState{unacked: map[uint64]*unackedMsg{}, nextSeq: rec.Next, diskCount: rec.Count, diskBytes: rec.Bytes, lastUsed: cfg.Now()}
	q.refill()
	q.publishStats()
	go q.loop()
	if cfg.Args.Expires > 0 {
		q.armExpires()
	}
	return q, nil
}

// Info implements Queue.
func (q *Classic) Info() Info { return q.info }

func (q *Classic) post(c cmd, bytes int64) bool {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return false
	}
	q.inbox = append(q.inbox, c)
	q.inboxBytes += bytes
	if c.kind == cPublish {
		q.inboxMsgs += int64(len(c.pubs))
	}
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return true
}

func (q *Classic) call(ctx context.Context, c cmd) (result, error) {
	c.reply = make(chan result, 1)
	c.ctx = ctx
	if !q.post(c, 0) {
		return result{}, ErrDeleted
	}
	select {
	case r := <-c.reply:
		return r, r.err
	case <-ctx.Done():
		return result{}, ctx.Err()
	case <-q.done:
		select {
		case r := <-c.reply:
			return r, r.err
		default:
		}
		return result{}, ErrDeleted
	}
}

// Publish implements Queue.
func (q *Classic) Publish(batch []Publish) {
	var bytes int64
	for _, p := range batch {
		bytes += int64(len(p.Msg.Body)) + publishOverhead
	}
	if !q.post(cmd{kind: cPublish, pubs: batch}, bytes) {
		// A deleted queue confirms nothing it did not take: nack.
		for _, p := range batch {
			if p.Confirm != nil {
				p.Confirm.Confirm([]uint64{p.Tag}, false)
			}
		}
	}
}

// PublishInline implements InlinePublisher: a lone message's turn runs on
// the caller's goroutine when no turn is under way and the inbox is empty
// (turnMu keeps turns one at a time and in order), calling enqueued between
// its enqueue and its deliveries; otherwise it is Publish, and enqueued is
// called once the batch is in the inbox (where a later Get or turn finds
// it). Larger batches go to the loop, which applies them while the caller
// reads on: inlining them too made a publisher with 100 confirms in flight
// slower.
func (q *Classic) PublishInline(batch []Publish, enqueued func()) {
	if enqueued == nil {
		enqueued = func() {}
	}
	if len(batch) > 1 {
		q.Publish(batch)
		enqueued()
		return
	}
	q.mu.Lock()
	if q.stopped || len(q.inbox) > 0 || !q.turnMu.TryLock() {
		q.mu.Unlock()
		q.Publish(batch)
		enqueued()
		return
	}
	q.turnMsgs = int64(len(batch))
	q.mu.Unlock()
	q.turn([]cmd{{kind: cPublish, pubs: batch, enqueued: enqueued}})
	q.turnMu.Unlock()
}

// Throttle implements Queue. It is the queue's flow control: a publisher
// waits while the inbox is over its high-water mark, and, while consumers are
// actively taking messages, while the ready backlog exceeds half the
// in-memory window — so a fast publisher runs at the consumers' pace instead
// of pushing the queue onto disk. (Half: what publishers have in flight
// when they are held back must still fit the window; at the full window
// every overshoot spilled, and the queue paged every message through disk
// while its consumers kept up.) Consumers that stall (nothing delivered
// for flowIdle) release publishers: the queue then grows onto disk as usual.
func (q *Classic) Throttle(ctx context.Context) error {
	for {
		q.mu.Lock()
		if q.stopped || !q.overloaded() {
			q.mu.Unlock()
			return nil
		}
		if q.drained == nil {
			q.drained = make(chan struct{})
		}
		ch := q.drained
		q.mu.Unlock()
		t := time.NewTimer(flowIdle)
		select {
		case <-ch:
		case <-t.C:
		case <-q.done:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// flowIdle is how long consumers may go without a delivery before flow
// control stops holding publishers back.
const flowIdle = 50 * time.Millisecond

// overloaded reports whether publishers should wait; q.mu is held.
func (q *Classic) overloaded() bool {
	if len(q.inbox) >= inboxHighWater || q.inboxBytes >= inboxHighWaterBytes {
		return true
	}
	backlog := q.sReady.Load() + q.inboxMsgs + q.turnMsgs
	if q.sConsumers.Load() == 0 || backlog <= int64(max(1, q.cfg.MemoryMessages/2)) {
		return false
	}
	return time.Now().UnixNano()-q.lastDelivery.Load() < int64(flowIdle)
}

// Ack implements Queue.
func (q *Classic) Ack(seqs []uint64) { q.post(cmd{kind: cAck, seqs: seqs}, 0) }

// Requeue implements Queue.
func (q *Classic) Requeue(seqs []uint64) { q.post(cmd{kind: cRequeue, seqs: seqs}, 0) }

// Reject implements Queue.
func (q *Classic) Reject(seqs []uint64) { q.post(cmd{kind: cReject, seqs: seqs}, 0) }

// Consume implements Queue.
func (q *Classic) Consume(ctx context.Context, c Consumer, opts ConsumeOptions) error {
	_, err := q.call(ctx, cmd{kind: cConsume, consumer: c, opts: opts})
	return err
}

// Cancel implements Queue.
func (q *Classic) Cancel(c Consumer) { q.post(cmd{kind: cCancel, consumer: c}, 0) }

// Wake implements Queue.
func (q *Classic) Wake(Consumer) { q.post(cmd{kind: cWake}, 0) }

// Touch resets the x-expires timer (queue.declare of an existing queue).
func (q *Classic) Touch() { q.post(cmd{kind: cTouch}, 0) }

// Get implements Queue.
func (q *Classic) Get(ctx context.Context, noAck bool) (Delivery, bool, error) {
	r, err := q.call(ctx, cmd{kind: cGet, noAck: noAck})
	return r.d, r.ok, err
}

// Purge implements Queue.
func (q *Classic) Purge(ctx context.Context) (int, error) {
	r, err := q.call(ctx, cmd{kind: cPurge})
	return r.n, err
}

// Delete implements Queue.
func (q *Classic) Delete(ctx context.Context, ifUnused, ifEmpty bool) (int, error) {
	r, err := q.call(ctx, cmd{kind: cDelete, ifUnused: ifUnused, ifEmpty: ifEmpty})
	return r.n, err
}

// Close implements Queue: a clean stop that keeps the files.
func (q *Classic) Close(ctx context.Context) error {
	_, err := q.call(ctx, cmd{kind: cClose})
	if err == ErrDeleted {
		return nil
	}
	return err
}

// SetStorage converts the queue's files to opts (queue-version change).
func (q *Classic) SetStorage(ctx context.Context, opts store.Options) error {
	_, err := q.call(ctx, cmd{kind: cSetStorage, storeOpt: opts})
	return err
}

// StorageVersion is the layout of the queue's files.
func (q *Classic) StorageVersion() int {
	r, err := q.call(context.Background(), cmd{kind: cSetStorage})
	if err != nil {
		return 0
	}
	return r.n
}

// Stats implements Queue.
func (q *Classic) Stats() Stats {
	return Stats{
		Ready:          int(q.sReady.Load()),
		Unacked:        int(q.sUnacked.Load()),
		Consumers:      int(q.sConsumers.Load()),
		ReadyBytes:     q.sReadyBytes.Load(),
		UnackedBytes:   q.sUnackedBytes.Load(),
		Published:      q.sPublished.Load(),
		Delivered:      q.sDelivered.Load(),
		Acked:          q.sAcked.Load(),
		ActiveConsumer: q.sActive.Load(),
	}
}

func (q *Classic) publishStats() {
	s := &q.st
	q.sReady.Store(int64(len(s.ready) - s.head + s.diskCount))
	q.sReadyBytes.Store(s.readyBytes + s.diskBytes)
	q.sUnacked.Store(int64(len(s.unacked)))
	q.sUnackedBytes.Store(s.unackedB)
	q.sConsumers.Store(int64(len(s.consumers)))
	q.sActive.Store(len(s.consumers) > 0)
}

// ConfirmsAtEnqueue reports whether a publish of msg can be confirmed as soon
// as it is handed to the queue: the queue neither fsyncs it (a transient
// message, or a non-durable queue) nor may refuse it (x-overflow
// reject-publish with a length limit).
func (q *Classic) ConfirmsAtEnqueue(msg *message.Message) bool {
	if msg.Persistent && q.info.Durable {
		return false
	}
	return q.args.Overflow == "drop-head" || (q.args.MaxLength < 0 && q.args.MaxLengthBytes < 0)
}
