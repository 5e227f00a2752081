package forward

import (
	"context"
	"sync"

	"github.com/warrenmq/warren/broker/cluster/transport"
)

const (
	settleAck byte = iota + 1
	settleRequeue
	settleReject
)

// Settlements through a proxy (Ack, Requeue, Reject) go to the owner
// without waiting, at most maxSettleCalls calls in flight per proxy queue:
// what is settled while they are under way queues up and goes with the
// next call, in order, as one request of several (op, seqs) runs
// ("forward.settle", settleVersion). The calls are Sent (Immediate: the
// settling goroutine, a client's reader, never waits on the link; the
// calls in flight are bounded here) under the settler's lock, so they
// leave in order; the owner applies them where it reads them. A get,
// purge, delete or stats call through the proxy waits for the
// settlements queued or under way, so it sees a requeue made before it
// (as on one node).
const (
	// One call at a time: the acks read while it is under way make the
	// next one. With 4, a forwarded s5's settle calls carried about 27
	// acks, with 1 about 40 (and, with MaxInFlight 3, the frames between
	// the two nodes fell by a quarter, the s5 rate rose about 4%): each
	// call is a write here and a read and an answer on the owner.
	maxSettleCalls = 1
	// maxSettleSeqs bounds the seqs of one call (8 bytes each).
	maxSettleSeqs = 1 << 16
)

type settleOp struct {
	op    byte
	seqs  []uint64
	owned bool // seqs is this package's, not the caller's: append may grow it
}

// settler is a proxy queue's settlements.
type settler struct {
	mu     sync.Mutex
	queued []settleOp
	calls  int           // calls in flight
	done   chan struct{} // closed when nothing is queued or in flight; nil then
}

// settle queues a settlement and sends it if fewer than maxSettleCalls
// calls are under way. One that cannot be sent leaves the messages
// unacked on the owner (warned).
func (q *Queue) settle(op byte, seqs []uint64) {
	if len(seqs) == 0 {
		return
	}
	st := &q.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done == nil {
		st.done = make(chan struct{})
	}
	if k := len(st.queued) - 1; k >= 0 && st.queued[k].op == op {
		last := &st.queued[k]
		if !last.owned {
			last.seqs = append(make([]uint64, 0, 2*(len(last.seqs)+len(seqs))), last.seqs...)
			last.owned = true
		}
		last.seqs = append(last.seqs, seqs...)
	} else {
		st.queued = append(st.queued, settleOp{op: op, seqs: seqs})
	}
	q.sendSettlementsLocked()
}

// sendSettlementsLocked sends what is queued while fewer than
// maxSettleCalls calls are under way; once nothing is queued or in
// flight, it closes done. st.mu held.
func (q *Queue) sendSettlementsLocked() {
	st := &q.st
	for st.calls < maxSettleCalls && len(st.queued) > 0 {
		ops := st.take()
		size := 1 + 2 + len(q.info.Vhost) + 2 + len(q.info.Name)
		for _, o := range ops {
			size += 1 + 4 + 8*len(o.seqs)
		}
		req := appendSettleRef(make([]byte, 0, size), q.info.Vhost, q.info.Name)
		n := 0
		for _, o := range ops {
			req = appendSeqs(req, o.op, o.seqs)
			n += len(o.seqs)
		}
		if !q.c.track() {
			// The client is closed: nothing more is sent.
			st.queued = nil
			break
		}
		st.calls++
		ctx := transport.Immediate(transport.Within(q.c.ctx, q.c.cfg.CallTimeout))
		err := q.c.cfg.Network.Send(ctx, q.node, methodSettle, req, func(_ []byte, err error) {
			q.settled(n, err)
		})
		if err != nil {
			st.calls--
			q.c.wg.Done()
			q.warnSettle(n, err)
		}
	}
	if st.calls == 0 && len(st.queued) == 0 && st.done != nil {
		close(st.done)
		st.done = nil
	}
}

// settled is a settle call's answer, on the transport's reader: the next
// call goes.
func (q *Queue) settled(n int, err error) {
	if err != nil {
		q.warnSettle(n, err)
	}
	q.st.mu.Lock()
	q.st.calls--
	q.sendSettlementsLocked()
	q.st.mu.Unlock()
	q.c.wg.Done()
}

func (q *Queue) warnSettle(n int, err error) {
	q.c.log.Warn("forward: settling messages on their queue's node failed; they stay unacked there", "node", q.node, "vhost", q.info.Vhost, "queue", q.info.Name, "messages", n, "err", err)
}

// take removes the queued runs of the next call, up to maxSettleSeqs
// seqs (a longer run is split). st.mu held.
func (st *settler) take() []settleOp {
	n, k := 0, 0
	for k < len(st.queued) && n+len(st.queued[k].seqs) <= maxSettleSeqs {
		n += len(st.queued[k].seqs)
		k++
	}
	if k == 0 { // the first run alone is too long
		first := &st.queued[0]
		part := settleOp{op: first.op, seqs: first.seqs[:maxSettleSeqs:maxSettleSeqs]}
		first.seqs = first.seqs[maxSettleSeqs:]
		return []settleOp{part}
	}
	ops := st.queued[:k:k]
	st.queued = st.queued[k:]
	if len(st.queued) == 0 {
		st.queued = nil
	}
	return ops
}

// appendSettleRef starts a settle request: settleVersion, then the queue
// (as appendQueueRef); its runs follow (appendSeqs).
func appendSettleRef(b []byte, vhost, name string) []byte {
	return appendString(appendString(append(b, settleVersion), vhost), name)
}

// waitSettled waits for the settlements queued or under way.
func (q *Queue) waitSettled(ctx context.Context) {
	q.st.mu.Lock()
	ch := q.st.done
	q.st.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}
