package forward

import (
	"context"
	"sync"
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
// ("forward.settle", settleVersion). A get, purge, delete or stats call
// through the proxy waits for the settlements queued or under way, so it
// sees a requeue made before it (as on one node).
const (
	maxSettleCalls = 2
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

// settle queues a settlement and starts a call if fewer than
// maxSettleCalls are under way. One that cannot be sent leaves the
// messages unacked on the owner (warned).
func (q *Queue) settle(op byte, seqs []uint64) {
	if len(seqs) == 0 {
		return
	}
	st := &q.st
	st.mu.Lock()
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
	start := st.calls < maxSettleCalls
	if start {
		st.calls++
	}
	st.mu.Unlock()
	if start && !q.c.goroutine(q.sendSettlements) {
		// The client is closed: nothing more is sent.
		st.mu.Lock()
		st.queued = nil
		st.finishCall()
		st.mu.Unlock()
	}
}

// finishCall counts a call's goroutine out. st.mu held.
func (st *settler) finishCall() {
	st.calls--
	if st.calls == 0 {
		close(st.done)
		st.done = nil
	}
}

// sendSettlements sends what is queued until nothing is.
func (q *Queue) sendSettlements() {
	st := &q.st
	for {
		st.mu.Lock()
		if len(st.queued) == 0 {
			st.finishCall()
			st.mu.Unlock()
			return
		}
		ops := st.take()
		st.mu.Unlock()
		req := appendSettleRef(nil, q.info.Vhost, q.info.Name)
		n := 0
		for _, o := range ops {
			req = appendSeqs(req, o.op, o.seqs)
			n += len(o.seqs)
		}
		ctx, cancel := context.WithTimeout(q.c.ctx, q.c.cfg.CallTimeout)
		_, err := q.c.cfg.Network.Call(ctx, q.node, methodSettle, req)
		cancel()
		if err != nil {
			q.c.log.Warn("forward: settling messages on their queue's node failed; they stay unacked there", "node", q.node, "vhost", q.info.Vhost, "queue", q.info.Name, "messages", n, "err", err)
		}
	}
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
