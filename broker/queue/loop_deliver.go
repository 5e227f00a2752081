package queue

import (
	"slices"
	"sort"
	"time"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/store"
)

// The ready list and delivery: the in-memory window of ready messages (by
// priority, then sequence), its refill from the index, delivery to consumers
// with credit, and settlement (ack, reject, requeue) of what was delivered.

// less orders ready messages: higher priority first, then by seq.
func (q *Classic) less(a, b *qmsg) bool {
	if q.args.MaxPriority > 0 {
		pa, pb := min(a.msg.Priority, q.args.MaxPriority), min(b.msg.Priority, q.args.MaxPriority)
		if pa != pb {
			return pa > pb
		}
	}
	return a.seq < b.seq
}

// pushReady inserts m at its place (usually the tail).
func (q *Classic) pushReady(m *qmsg) {
	s := &q.st
	s.readyBytes += int64(len(m.msg.Body))
	n := len(s.ready)
	if n == s.head || q.less(s.ready[n-1], m) {
		s.ready = append(s.ready, m)
		return
	}
	live := s.ready[s.head:]
	i := sort.Search(len(live), func(i int) bool { return q.less(m, live[i]) })
	s.ready = append(s.ready, nil)
	copy(s.ready[s.head+i+1:], s.ready[s.head+i:])
	s.ready[s.head+i] = m
}

func (q *Classic) peek() *qmsg {
	s := &q.st
	if s.head == len(s.ready) {
		q.refill()
		if s.head == len(s.ready) {
			return nil
		}
	}
	return s.ready[s.head]
}

func (q *Classic) pop() *qmsg {
	s := &q.st
	m := s.ready[s.head]
	s.ready[s.head] = nil
	s.head++
	s.readyBytes -= int64(len(m.msg.Body))
	if s.head == len(s.ready) {
		s.ready = s.ready[:0]
		s.head = 0
	} else if s.head > 1024 && s.head*2 > len(s.ready) {
		n := copy(s.ready, s.ready[s.head:])
		clear(s.ready[n:])
		s.ready = s.ready[:n]
		s.head = 0
	}
	return m
}

// refill loads messages from disk when the in-memory window runs low.
func (q *Classic) refill() {
	s := &q.st
	if s.diskCount == 0 || len(s.ready)-s.head >= q.cfg.MemoryMessages/2 {
		return
	}
	want := q.cfg.MemoryMessages - (len(s.ready) - s.head)
	loaded := 0
	next, err := q.idx.Read(s.diskFrom, want, windowBytes/2, func(e store.Entry) {
		m, err := message.Decode(e.Data)
		if err != nil {
			q.log.Error("undecodable message in queue index", "seq", e.Seq, "err", err)
			return
		}
		qm := &qmsg{seq: e.Seq, msg: m, redelivered: e.Redelivered, inIndex: true}
		q.pushReady(qm)
		s.diskBytes -= int64(len(m.Body))
		loaded++
	})
	if err != nil {
		q.log.Error("read queue index", "err", err)
		return
	}
	s.diskFrom = next
	s.diskCount -= loaded
	if loaded == 0 || s.diskCount < 0 {
		// The index holds nothing more past diskFrom.
		s.diskCount, s.diskBytes = 0, 0
	}
	if s.diskCount == 0 {
		s.diskBytes = 0
	}
}

// deliver hands ready messages to consumers with credit, round robin, then flushes
// each consumer that got some: one socket write per consumer and turn.
//
// The counters are published before the first flush: a client that got the
// deliveries and then asks for the queue's counts (queue.declare, the HTTP
// API) sees the deliveries taken out of the ready count.
func (q *Classic) deliver() {
	q.deliverReady()
	q.markDelivered()
	q.ackForgotten()
	published := false
	for _, cs := range q.st.consumers {
		if cs.flush {
			if !published {
				q.publishTurnStats()
				published = true
			}
			cs.flush = false
			cs.c.Flush()
		}
	}
}

func (q *Classic) deliverReady() {
	s := &q.st
	for len(s.consumers) > 0 {
		progressed := false
		n := len(s.consumers)
		if q.args.SingleActiveConsumer {
			n = 1
		}
		for i := 0; i < n; i++ {
			m := q.peek()
			if m == nil {
				return
			}
			cs := s.consumers[(s.rr+i)%n]
			if cs.blocked {
				continue
			}
			if exp := q.expiryOf(m.msg); exp != 0 && exp <= q.now().UnixNano() {
				q.pop()
				q.drop(m, "expired")
				progressed = true
				continue
			}
			d := Delivery{Msg: m.msg, Queue: q, Seq: m.seq, Redelivered: m.redelivered}
			if !cs.c.Deliver(d) {
				cs.blocked = true
				continue
			}
			q.pop()
			cs.flush = true
			q.sDelivered.Add(1)
			q.lastDelivery.Store(time.Now().UnixNano())
			progressed = true
			if cs.c.NoAck() {
				q.forget(m)
			} else {
				s.unacked[m.seq] = &unackedMsg{m: m, cons: cs}
				s.unackedB += int64(len(m.msg.Body))
				cs.unacked++
				q.noteDelivered(m)
			}
		}
		s.rr++
		if !progressed {
			return
		}
	}
}

// noteDelivered remembers that a durable message went to a consumer that
// will ack it, for markDelivered. A message already redelivered is marked.
func (q *Classic) noteDelivered(m *qmsg) {
	if m.inIndex && !m.redelivered && q.isDurable(m) {
		q.st.toMark = append(q.st.toMark, m.seq)
	}
}

// markDelivered records the turn's deliveries in the index (one status
// write per run of entries) before the turn flushes them (see doc.go for
// the writer that may be faster): after a crash,
// messages that were handed to a consumer come back redelivered, and only
// those, as with RabbitMQ's classic queue index.
func (q *Classic) markDelivered() {
	s := &q.st
	if len(s.toMark) == 0 {
		return
	}
	slices.Sort(s.toMark)
	if err := q.idx.MarkDelivered(s.toMark); err != nil {
		q.log.Error("mark delivered in queue index", "err", err)
	}
	s.toMark = s.toMark[:0]
}

// forget removes a settled message from the index.
// forget takes a message out of the queue for good without a consumer's ack
// (an auto-ack delivery, a get with no-ack, expiry, overflow). Its index
// entry is acked by the next ackForgotten, in one batch with the turn's
// others: one status write per run of entries, not a read and a write of
// the segment per message, which made an auto-ack consumer of a queue
// spilled to disk cost twice its publisher.
func (q *Classic) forget(m *qmsg) {
	if m.inIndex {
		s := &q.st
		if q.isDurable(m) {
			s.forgotten = append(s.forgotten, m.seq)
		} else {
			s.forgottenTransient = append(s.forgottenTransient, m.seq)
		}
	}
	q.sAcked.Add(1)
}

// ackForgotten acks in the index what forget took out of the queue. It
// runs before the turn's deliveries are flushed to consumers (as the
// per-message ack it replaces did), so a durable message an auto-ack
// consumer may have seen is acked in the index before the consumer sees it.
func (q *Classic) ackForgotten() {
	s := &q.st
	if len(s.forgotten) > 0 {
		slices.Sort(s.forgotten)
		if err := q.idx.Ack(s.forgotten); err != nil {
			q.log.Error("ack in queue index", "err", err)
		}
		s.forgotten = s.forgotten[:0]
	}
	if len(s.forgottenTransient) > 0 {
		slices.Sort(s.forgottenTransient)
		if err := q.idx.AckTransient(s.forgottenTransient); err != nil {
			q.log.Error("ack in queue index", "err", err)
		}
		s.forgottenTransient = s.forgottenTransient[:0]
	}
}

func (q *Classic) settle(seqs []uint64, reject bool) {
	var indexed, transient []uint64
	var dead []*message.Message
	for _, seq := range seqs {
		u, ok := q.takeUnacked(seq)
		if !ok {
			continue
		}
		switch {
		case u.m.inIndex && q.info.Durable && u.m.msg.Persistent:
			indexed = append(indexed, seq)
		case u.m.inIndex:
			transient = append(transient, seq)
		}
		if reject {
			dead = append(dead, u.m.msg)
		}
	}
	if len(indexed) > 0 {
		if err := q.idx.Ack(indexed); err != nil {
			q.log.Error("ack in queue index", "err", err)
		}
	}
	if len(transient) > 0 {
		if err := q.idx.AckTransient(transient); err != nil {
			q.log.Error("ack in queue index", "err", err)
		}
	}
	q.sAcked.Add(uint64(len(seqs)))
	if len(dead) > 0 {
		q.deadLetter(dead, "rejected")
	}
}

// takeUnacked removes a delivery from the unacked set and its consumer's
// count; ok is false for a seq that is not (or no longer) unacked.
func (q *Classic) takeUnacked(seq uint64) (u *unackedMsg, ok bool) {
	s := &q.st
	u, ok = s.unacked[seq]
	if !ok {
		return nil, false
	}
	delete(s.unacked, seq)
	s.unackedB -= int64(len(u.m.msg.Body))
	if u.cons != nil {
		u.cons.unacked--
	}
	return u, true
}

func (q *Classic) requeue(seqs []uint64) {
	for _, seq := range seqs {
		u, ok := q.takeUnacked(seq)
		if !ok {
			continue
		}
		u.m.redelivered = true
		q.pushReady(u.m)
	}
}

func (q *Classic) get(noAck bool) (Delivery, bool) {
	s := &q.st
	s.lastUsed = q.now()
	for {
		m := q.peek()
		if m == nil {
			return Delivery{}, false
		}
		q.pop()
		if exp := q.expiryOf(m.msg); exp != 0 && exp <= q.now().UnixNano() {
			q.drop(m, "expired")
			continue
		}
		q.sDelivered.Add(1)
		d := Delivery{Msg: m.msg, Queue: q, Seq: m.seq, Redelivered: m.redelivered, Remaining: len(s.ready) - s.head + s.diskCount}
		if noAck {
			q.forget(m)
			q.ackForgotten()
		} else {
			s.unacked[m.seq] = &unackedMsg{m: m}
			s.unackedB += int64(len(m.msg.Body))
			q.noteDelivered(m)
			q.markDelivered()
		}
		return d, true
	}
}

func (q *Classic) addConsumer(c Consumer, opts ConsumeOptions) error {
	s := &q.st
	for _, cs := range s.consumers {
		if cs.opts.Exclusive {
			return ErrExclusiveConsumer
		}
	}
	if opts.Exclusive && len(s.consumers) > 0 {
		return ErrConsumersExist
	}
	cs := &consumerState{c: c, opts: opts}
	s.consumers = append(s.consumers, cs)
	// Higher x-priority consumers first; stable keeps arrival order.
	sort.SliceStable(s.consumers, func(i, j int) bool { return s.consumers[i].opts.Priority > s.consumers[j].opts.Priority })
	s.hadConsumer = true
	s.lastUsed = q.now()
	return nil
}

func (q *Classic) removeConsumer(c Consumer) {
	s := &q.st
	for i, cs := range s.consumers {
		if cs.c == c {
			s.consumers = append(s.consumers[:i], s.consumers[i+1:]...)
			for _, u := range s.unacked {
				if u.cons == cs {
					u.cons = nil
				}
			}
			break
		}
	}
	s.lastUsed = q.now()
	if len(s.consumers) == 0 && s.hadConsumer && q.info.AutoDelete {
		q.cfg.Host.Expired(q)
	}
}
