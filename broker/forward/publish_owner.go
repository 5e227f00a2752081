package forward

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/broker/queue"
)

// LocalNow is what a Local adds so that no forwarded publish waits on the
// transport's reader of a peer's data stream (where the owner starts
// them, holding up every raft append and call from that peer): the start
// looks each queue up with LocalQueueNow and, when that would wait, hands
// the group and every later one of the same sender to a goroutine that
// waits with LocalQueueWait, keeping their order. A Local without it is
// looked up with LocalQueue on the reader.
type LocalNow interface {
	// LocalQueueNow is LocalQueue without waiting: ready is false when
	// finding the queue would wait (its open under way, a lock held across
	// a vhost's start).
	LocalQueueNow(vhost, name string) (q queue.Queue, ready bool, err error)
	// LocalQueueWait is LocalQueue waiting until ctx ends at most.
	LocalQueueWait(ctx context.Context, vhost, name string) (queue.Queue, error)
}

// heldPublishes are the groups of forwarded publishes that wait for their
// queue, per sending node, in the order that node sent them; one goroutine
// a node with any publishes them.
type heldPublishes struct {
	senders atomic.Int64 // len(m): the start's check costs a load while none wait
	mu      sync.Mutex
	m       map[string]*heldSender
}

type heldSender struct{ groups []heldGroup }

// heldGroup is a group of a publish call and where its verdicts go.
type heldGroup struct {
	ctx context.Context
	g   group
	col *collector
	tag int // the group's first message's index in the call
}

// hold queues a group behind from's held ones (starting their goroutine
// when there were none).
func (h *handlers) hold(from string, hg heldGroup) {
	h.held.mu.Lock()
	defer h.held.mu.Unlock()
	if h.held.m == nil {
		h.held.m = map[string]*heldSender{}
	}
	s, ok := h.held.m[from]
	if !ok {
		s = &heldSender{}
		h.held.m[from] = s
		h.held.senders.Add(1)
		go h.publishHeld(from, s)
	}
	s.groups = append(s.groups, hg)
}

// holding reports whether from has groups waiting (so its next groups
// must wait behind them). Only from's start adds them.
func (h *handlers) holding(from string) bool {
	if h.held.senders.Load() == 0 {
		return false
	}
	h.held.mu.Lock()
	_, ok := h.held.m[from]
	h.held.mu.Unlock()
	return ok
}

// publishHeld publishes from's held groups in order, each once its queue
// is found (or nacks it when the queue is not this node's or its call's
// context ends first), and ends when none is left. A group leaves the
// list only once published, so a start that sees the list adds behind it.
func (h *handlers) publishHeld(from string, s *heldSender) {
	for {
		h.held.mu.Lock()
		if len(s.groups) == 0 {
			delete(h.held.m, from)
			h.held.senders.Add(-1)
			h.held.mu.Unlock()
			return
		}
		hg := s.groups[0]
		h.held.mu.Unlock()

		q, err := h.now.LocalQueueWait(hg.ctx, hg.g.vhost, hg.g.queue)
		if err == nil && hg.ctx.Err() != nil {
			// The call failed (its sender nacked the messages): a queue
			// found as it ended must not take them.
			err = hg.ctx.Err()
		}
		if err != nil {
			h.refuseGroup(from, hg.g, hg.col, hg.tag, err)
		} else {
			// Listed first: its confirms may complete the call at once.
			hg.col.mu.Lock()
			hg.col.heldQueues = append(hg.col.heldQueues, q)
			hg.col.mu.Unlock()
			h.publishGroup(q, hg.g, hg.col, hg.tag)
		}

		h.held.mu.Lock()
		s.groups[0] = heldGroup{}
		s.groups = s.groups[1:]
		h.held.mu.Unlock()
	}
}

// publishGroup publishes a group's messages into q, tagged from tag on.
func (h *handlers) publishGroup(q queue.Queue, g group, col *collector, tag int) {
	pubs := make([]queue.Publish, len(g.msgs))
	for j, m := range g.msgs {
		m.ID = h.l.NewMessageID() // ids are per node
		pubs[j] = queue.Publish{Msg: m, Confirm: col, Tag: uint64(tag + j)}
	}
	q.Publish(pubs)
}

// refuseGroup nacks a group whose queue was not found.
func (h *handlers) refuseGroup(from string, g group, col *collector, tag int, err error) {
	h.log.Warn("forward: a publish from another node names a queue this node does not hold; nacked", "from", from, "vhost", g.vhost, "queue", g.queue, "messages", len(g.msgs), "err", err)
	col.Confirm(seqTags(tag, len(g.msgs)), false)
}
