package queue

import (
	"time"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/store"
)

// Limits and expiry: x-max-length and x-max-length-bytes with their
// overflow behaviours, per-queue and per-message TTL, x-expires, purge.

func (q *Classic) expiryOf(m *message.Message) int64 {
	exp := m.Expiry
	if q.args.HasMessageTTL {
		t := m.Timestamp + int64(q.args.MessageTTL)
		if exp == 0 || t < exp {
			exp = t
		}
	}
	return exp
}

func (q *Classic) full(extra int) bool {
	s := &q.st
	n := int64(len(s.ready) - s.head + s.diskCount)
	if q.args.MaxLength >= 0 && n >= q.args.MaxLength {
		return true
	}
	return q.args.MaxLengthBytes >= 0 && s.readyBytes+s.diskBytes+int64(extra) > q.args.MaxLengthBytes
}

// drop removes a message that left the queue unconsumed (expired, over the
// length limit), dead-lettering it when configured.
func (q *Classic) drop(m *qmsg, reason string) {
	q.forget(m)
	q.deadLetter([]*message.Message{m.msg}, reason)
}

func (q *Classic) purge() int {
	s := &q.st
	n := len(s.ready) - s.head + s.diskCount
	var seqs []uint64
	for _, m := range s.ready[s.head:] {
		if m.inIndex {
			seqs = append(seqs, m.seq)
		}
	}
	s.ready, s.head, s.readyBytes = nil, 0, 0
	if s.diskCount > 0 {
		_, _ = q.idx.Read(s.diskFrom, s.diskCount, 0, func(e store.Entry) { seqs = append(seqs, e.Seq) })
		s.diskCount, s.diskBytes = 0, 0
	}
	if len(seqs) > 0 {
		if err := q.idx.Ack(seqs); err != nil {
			q.log.Error("purge queue index", "err", err)
		}
	}
	return n
}

// enforceLimits applies x-max-length and x-max-length-bytes with drop-head.
func (q *Classic) enforceLimits() {
	if q.args.Overflow != "drop-head" || (q.args.MaxLength < 0 && q.args.MaxLengthBytes < 0) {
		return
	}
	s := &q.st
	for {
		n := int64(len(s.ready) - s.head + s.diskCount)
		over := (q.args.MaxLength >= 0 && n > q.args.MaxLength) || (q.args.MaxLengthBytes >= 0 && s.readyBytes+s.diskBytes > q.args.MaxLengthBytes)
		if !over {
			return
		}
		m := q.peek()
		if m == nil {
			return
		}
		q.pop()
		q.drop(m, "maxlen")
	}
}

// expireHead drops expired messages at the head (RabbitMQ expires at the head).
func (q *Classic) expireHead() {
	if !q.args.HasMessageTTL && !q.anyPerMessageTTL() {
		return
	}
	now := q.now().UnixNano()
	for {
		m := q.peek()
		if m == nil {
			return
		}
		exp := q.expiryOf(m.msg)
		if exp == 0 || exp > now {
			return
		}
		q.pop()
		q.drop(m, "expired")
	}
}

func (q *Classic) anyPerMessageTTL() bool {
	m := q.peek()
	return m != nil && m.msg.Expiry != 0
}

// armExpiry sets a timer for the head message's expiry.
func (q *Classic) armExpiry() {
	s := &q.st
	m := q.peek()
	if m == nil {
		return
	}
	exp := q.expiryOf(m.msg)
	if exp == 0 {
		return
	}
	d := time.Duration(exp - q.now().UnixNano())
	if d < 0 {
		d = 0
	}
	if s.expiryTimer != nil {
		s.expiryTimer.Stop()
	}
	s.expiryTimer = time.AfterFunc(d+time.Millisecond, func() { q.Wake(nil) })
}

func (q *Classic) armExpires() {
	time.AfterFunc(q.args.Expires, func() { q.post(cmd{kind: cExpiresCheck}, 0) })
}

// checkExpires deletes an unused queue after x-expires; it re-arms otherwise.
func (q *Classic) checkExpires() bool {
	s := &q.st
	idle := q.now().Sub(s.lastUsed)
	if len(s.consumers) == 0 && idle >= q.args.Expires {
		q.cfg.Host.Expired(q)
		return false
	}
	wait := q.args.Expires - idle
	if len(s.consumers) > 0 || wait <= 0 {
		wait = q.args.Expires
	}
	time.AfterFunc(wait, func() { q.post(cmd{kind: cExpiresCheck}, 0) })
	return false
}
