package forward

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/queue"
)

// Local is the owning node's side: its queues and its vhosts' deletes.
type Local interface {
	// LocalQueue is a queue this node holds (an error when it holds no
	// such queue).
	LocalQueue(vhost, name string) (queue.Queue, error)
	// DeleteQueue deletes a queue this node holds, checking the
	// conditions, and returns how many messages it held.
	DeleteQueue(ctx context.Context, vhost, name string, ifUnused, ifEmpty bool) (int, error)
	// NewMessageID is a message id unique on this node.
	NewMessageID() uint64
}

// Serve registers the owner's handlers of the forwarded calls on nw.
// toStatus maps Local's errors to gRPC status errors (the vhost's
// ToStatus); nil sends them as codes.Unknown.
func Serve(nw transport.Network, l Local, toStatus func(error) error, log *slog.Logger) {
	h := newHandlers(nw, l, toStatus, log)
	nw.HandleOrdered(methodPublish, versionedStart(methodPublish, h.publish))
	nw.Handle(methodStats, versioned(methodStats, h.stats))
	nw.Handle(methodGet, versioned(methodGet, h.get))
	// Settlements are applied where they are read, in the order sent
	// (settle never blocks: a queue's Ack and Requeue queue a command).
	nw.HandleInline(methodSettle, versioned(methodSettle, h.settle))
	nw.Handle(methodPurge, versioned(methodPurge, h.purge))
	nw.Handle(methodDelete, versioned(methodDelete, h.delete))
	nw.Handle(methodConsume, versioned(methodConsume, h.consume))
	nw.Handle(methodCancel, versioned(methodCancel, h.cancel))
	nw.Handle(methodCredit, versioned(methodCredit, h.credit))
	nw.Watch(func(node string, up bool) {
		if !up {
			h.nodeDown(node)
		}
	})
}

func newHandlers(nw transport.Network, l Local, toStatus func(error) error, log *slog.Logger) *handlers {
	if log == nil {
		log = slog.Default()
	}
	if toStatus == nil {
		toStatus = func(err error) error { return err }
	}
	h := &handlers{l: l, nw: nw, callTimeout: 30 * time.Second, toStatus: toStatus, log: log.With("subsystem", "forward"), cons: consumers{m: map[consumerKey]*remoteConsumer{}, byQueue: map[getKey]map[*remoteConsumer]struct{}{}, gets: map[getKey]map[uint64]struct{}{}}}
	h.now, _ = l.(LocalNow)
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	h.expired = expired
	return h
}

type handlers struct {
	l           Local
	nw          transport.Network
	callTimeout time.Duration
	cons        consumers
	toStatus    func(error) error
	log         *slog.Logger
	// now is l's non-blocking lookup, if it has one; held are the
	// publishes that wait for their queue (publish_owner.go).
	now  LocalNow
	held heldPublishes
	// expired is a context that has ended: a queue's Throttle given it
	// returns at once, an error when it would have waited.
	expired context.Context
}

func badRequest(err error) error { return status.Error(codes.InvalidArgument, err.Error()) }

// publish puts each group's messages in its queue (the transport starts
// the calls of one node in the order it sent them, so a channel's messages
// reach their queue in the order published) and answers once every
// message is confirmed or refused there, one verdict a message. The
// answer is given by whoever confirms the last message (a queue's loop,
// its fsync), with no goroutine waiting for it, unless a queue is
// overloaded then or a group waits for its queue: a goroutine waits for
// those (the queues' flow control holds the answer, and so the sender's
// next calls). The call's end (its caller's cancel, its deadline, the
// link lost) answers at once where a goroutine waits; where none does,
// nothing watches it (that would cost a timer a call): the last confirm
// answers, to a caller that has failed the call already.
func (h *handlers) publish(ctx context.Context, from string, req []byte, answer func([]byte, error)) error {
	pr, err := decodePublishes(req)
	if err != nil {
		return badRequest(err)
	}
	groups, total := pr.groups, pr.total
	col := &collector{verdicts: make([]byte, total), left: total, done: make(chan struct{})}
	if total == 0 {
		close(col.done)
	}
	var queues []queue.Queue
	i := 0
	held := h.now != nil && h.holding(from)
	for _, g := range groups {
		tag := i
		i += len(g.msgs)
		if held {
			h.hold(from, heldGroup{ctx: ctx, g: g, col: col, tag: tag})
			continue
		}
		var q queue.Queue
		if h.now != nil {
			var ready bool
			q, ready, err = h.now.LocalQueueNow(g.vhost, g.queue)
			if !ready {
				// The start must not wait: this group and the rest of
				// this sender's wait for the queue elsewhere, in order.
				held = true
				h.hold(from, heldGroup{ctx: ctx, g: g, col: col, tag: tag})
				continue
			}
		} else {
			q, err = h.l.LocalQueue(g.vhost, g.queue)
		}
		if err != nil {
			h.refuseGroup(from, g, col, tag, err)
			continue
		}
		h.publishGroup(q, g, col, tag)
		queues = append(queues, q)
	}
	wait := func() ([]byte, error) {
		// The queues' flow control holds the answer (and so the sender's
		// next calls, MaxInFlight at most) while they are overloaded.
		for _, q := range queues {
			if err := q.Throttle(ctx); err != nil {
				return nil, status.FromContextError(err).Err()
			}
		}
		select {
		case <-col.done:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		col.mu.Lock()
		heldQueues := col.heldQueues
		col.mu.Unlock()
		for _, q := range heldQueues {
			if err := q.Throttle(ctx); err != nil {
				return nil, status.FromContextError(err).Err()
			}
		}
		col.mu.Lock()
		defer col.mu.Unlock()
		return append([]byte(nil), col.verdicts...), nil
	}

	var answered atomic.Bool
	reply := func(resp []byte, err error) {
		if answered.CompareAndSwap(false, true) {
			answer(resp, err)
		}
	}
	if held {
		go func() { reply(wait()) }()
		return nil
	}
	// Every message's queue is known: the last confirm answers.
	done := func() {
		for _, q := range queues {
			if q.Throttle(h.expired) != nil { // it would wait: overloaded
				go func() { reply(wait()) }()
				return
			}
		}
		col.mu.Lock()
		resp := append([]byte(nil), col.verdicts...)
		col.mu.Unlock()
		reply(resp, nil)
	}
	col.mu.Lock()
	if col.left > 0 {
		col.onDone = done
		col.mu.Unlock()
		return nil
	}
	col.mu.Unlock()
	done()
	return nil
}

func seqTags(from, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(from + i)
	}
	return out
}

// collector gathers the verdicts of one publish call.
type collector struct {
	mu       sync.Mutex
	verdicts []byte
	left     int
	done     chan struct{}
	// onDone, when set, is called (without mu) by the Confirm that
	// leaves none left.
	onDone func()
	// heldQueues are the queues of the call's groups that waited for
	// their queue (publish_owner.go), for the answer's Throttle.
	heldQueues []queue.Queue
}

func (c *collector) Confirm(tags []uint64, ok bool) {
	v := verdictNack
	if ok {
		v = verdictOK
	}
	var done func()
	c.mu.Lock()
	for _, t := range tags {
		if t >= uint64(len(c.verdicts)) || c.verdicts[t] != verdictPending {
			continue
		}
		c.verdicts[t] = v
		c.left--
		if c.left == 0 {
			close(c.done)
			done = c.onDone
		}
	}
	c.mu.Unlock()
	if done != nil {
		done()
	}
}

// queue finds the queue a request names, waiting for its open under way
// no longer than the call (ctx).
func (h *handlers) queue(ctx context.Context, req []byte) (queue.Queue, decoder, error) {
	vh, name, d, err := decodeQueueRef(req)
	if err != nil {
		return nil, d, badRequest(err)
	}
	var q queue.Queue
	if h.now != nil {
		q, err = h.now.LocalQueueWait(ctx, vh, name)
	} else {
		q, err = h.l.LocalQueue(vh, name)
	}
	if err != nil {
		return nil, d, h.toStatus(err)
	}
	return q, d, nil
}

func (h *handlers) stats(ctx context.Context, _ string, req []byte) ([]byte, error) {
	q, _, err := h.queue(ctx, req)
	if err != nil {
		return nil, err
	}
	return appendStats(nil, q.Stats()), nil
}

func (h *handlers) get(ctx context.Context, from string, req []byte) ([]byte, error) {
	q, d, err := h.queue(ctx, req)
	if err != nil {
		return nil, err
	}
	noAck := d.u8() == 1
	if d.err != nil {
		return nil, badRequest(d.err)
	}
	dl, ok, err := q.Get(ctx, noAck)
	if err != nil {
		return nil, h.toStatus(err)
	}
	if ok && !noAck {
		h.cons.got(from, q, dl.Seq)
	}
	return appendDelivery(nil, dl, ok), nil
}

// settle applies a settle call's runs, in order, where the transport
// reads it (HandleInline): it never waits. A queue that is not ready to
// be found without waiting (its open under way, the node's vhosts being
// changed: it cannot hold this node's deliveries yet) has its runs
// applied by a goroutine that waits for it.
func (h *handlers) settle(_ context.Context, from string, req []byte) ([]byte, error) {
	vh, name, d, err := decodeQueueRef(req)
	if err != nil {
		return nil, badRequest(err)
	}
	// One or more runs of (op, seqs), applied in order.
	var runs []settleOp
	for first := true; first || len(d.b) > 0; first = false {
		op, seqs := d.seqs()
		if d.err != nil {
			return nil, badRequest(d.err)
		}
		if op != settleAck && op != settleRequeue && op != settleReject {
			return nil, badRequest(fmt.Errorf("%w: settle op %d", errMalformed, op))
		}
		runs = append(runs, settleOp{op: op, seqs: seqs})
	}
	apply := func(q queue.Queue) {
		for _, r := range runs {
			h.settleRun(from, q, r.op, r.seqs)
		}
	}
	var q queue.Queue
	if h.now != nil {
		var ready bool
		q, ready, err = h.now.LocalQueueNow(vh, name)
		if !ready {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), h.callTimeout)
				defer cancel()
				q, err := h.now.LocalQueueWait(ctx, vh, name)
				if err != nil {
					h.log.Warn("forward: settlements from another node for a queue not found here; the messages stay unacked", "from", from, "vhost", vh, "queue", name, "err", err)
					return
				}
				apply(q)
			}()
			return nil, nil
		}
	} else {
		q, err = h.l.LocalQueue(vh, name)
	}
	if err != nil {
		return nil, h.toStatus(err)
	}
	apply(q)
	return nil, nil
}

// settleRun applies one run of a settle call.
func (h *handlers) settleRun(from string, q queue.Queue, op byte, seqs []uint64) {
	// Only what this node holds is settled: a stale settlement (its
	// messages were requeued when its consumer was dropped, the queue was
	// deleted and declared again, the node restarted) must not settle a
	// message another consumer holds now under the same seq.
	held := h.settledBy(from, q, seqs, make([]uint64, 0, len(seqs)))
	held = append(held, h.cons.settledGets(from, q, seqs)...)
	if len(held) < len(seqs) {
		h.log.Debug("forward: ignoring settlements of messages the node does not hold", "from", from, "stale", len(seqs)-len(held))
	}
	if len(held) == 0 {
		return
	}
	switch op {
	case settleAck:
		q.Ack(held)
	case settleRequeue:
		q.Requeue(held)
	case settleReject:
		q.Reject(held)
	}
}

func (h *handlers) purge(ctx context.Context, _ string, req []byte) ([]byte, error) {
	q, _, err := h.queue(ctx, req)
	if err != nil {
		return nil, err
	}
	n, err := q.Purge(ctx)
	if err != nil {
		return nil, h.toStatus(err)
	}
	return binary.BigEndian.AppendUint64(nil, uint64(n)), nil
}

func (h *handlers) delete(ctx context.Context, _ string, req []byte) ([]byte, error) {
	vh, name, d, err := decodeQueueRef(req)
	if err != nil {
		return nil, badRequest(err)
	}
	flags := d.u8()
	if d.err != nil {
		return nil, badRequest(d.err)
	}
	n, err := h.l.DeleteQueue(ctx, vh, name, flags&1 != 0, flags&2 != 0)
	if err != nil {
		return nil, h.toStatus(err)
	}
	return binary.BigEndian.AppendUint64(nil, uint64(n)), nil
}
