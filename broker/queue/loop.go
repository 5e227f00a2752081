package queue

import (
	"context"
	"sort"
	"time"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/store"
)

// loop is the queue goroutine: each turn takes the whole inbox, applies it,
// persists the turn's writes with one Append, asks for one group-commit
// Sync, and delivers to consumers.
func (q *Classic) loop() {
	for {
		<-q.signal
		q.mu.Lock()
		cmds := q.inbox
		q.inbox = nil
		q.inboxBytes = 0
		q.turnMsgs, q.inboxMsgs = q.inboxMsgs, 0
		if q.drained != nil {
			close(q.drained)
			q.drained = nil
		}
		q.mu.Unlock()
		if q.turn(cmds) {
			return
		}
		q.mu.Lock()
		q.turnMsgs = 0 // counted in sReady now (publishStats)
		q.mu.Unlock()
	}
}

// turn applies commands; it returns true when the queue stopped.
func (q *Classic) turn(cmds []cmd) bool {
	var writes []store.Entry
	var durableConfirms, directConfirms []Publish
	for i := range cmds {
		c := &cmds[i]
		switch c.kind {
		case cPublish:
			for _, p := range c.pubs {
				w, durable, refused := q.enqueue(p)
				if w != nil {
					writes = append(writes, *w)
				}
				if p.Confirm != nil && !refused {
					if durable {
						durableConfirms = append(durableConfirms, p)
					} else {
						directConfirms = append(directConfirms, p)
					}
				}
			}
		case cAck:
			q.settle(c.seqs, false)
		case cRequeue:
			q.requeue(c.seqs)
		case cReject:
			q.settle(c.seqs, true)
		case cConsume:
			c.reply <- result{err: q.addConsumer(c.consumer, c.opts)}
		case cCancel:
			q.removeConsumer(c.consumer)
		case cWake:
			for _, cs := range q.st.consumers {
				cs.blocked = false
			}
		case cTouch:
			q.st.lastUsed = q.now()
		case cExpiresCheck:
			if q.checkExpires() {
				return false
			}
		case cGet:
			d, ok := q.get(c.noAck)
			c.reply <- result{d: d, ok: ok}
		case cPurge:
			c.reply <- result{n: q.purge()}
		case cSynced:
			q.sendConfirms(c.pubs, c.err == nil)
		case cSetStorage:
			if c.storeOpt.Version == 0 {
				c.reply <- result{n: q.idx.Version()}
				continue
			}
			c.reply <- result{err: q.convert(c.ctx, c.storeOpt)}
		case cDelete:
			st := q.Stats()
			switch {
			case c.ifUnused && len(q.st.consumers) > 0:
				c.reply <- result{err: ErrInUse}
				continue
			case c.ifEmpty && st.Ready+st.Unacked > 0:
				c.reply <- result{err: ErrNotEmpty}
				continue
			}
			q.sendConfirms(durableConfirms, true)
			q.sendConfirms(directConfirms, true)
			n := q.stop(true)
			c.reply <- result{n: n}
			close(q.done)
			q.failRest(cmds[i+1:])
			return true
		case cClose:
			q.flushWrites(writes, durableConfirms)
			q.sendConfirms(directConfirms, true)
			q.stop(false)
			c.reply <- result{}
			close(q.done)
			q.failRest(cmds[i+1:])
			return true
		}
	}
	q.flushWrites(writes, durableConfirms)
	q.sendConfirms(directConfirms, true)
	q.deliver()
	q.enforceLimits()
	q.expireHead()
	q.refill()
	q.publishStats()
	q.armExpiry()
	return false
}

// flushWrites appends the turn's entries and requests the group commit
// whose completion confirms durable publishes.
func (q *Classic) flushWrites(writes []store.Entry, confirms []Publish) {
	if len(writes) > 0 {
		if err := q.idx.Append(writes); err != nil {
			q.log.Error("append to queue index", "err", err)
			q.sendConfirms(confirms, false)
			return
		}
	}
	if len(writes) == 0 && len(confirms) == 0 {
		return
	}
	if err := q.idx.Flush(); err != nil {
		q.log.Error("flush queue index", "err", err)
		q.sendConfirms(confirms, false)
		return
	}
	if len(confirms) == 0 {
		return
	}
	q.idx.Sync(context.Background(), func(err error) {
		if err != nil {
			q.log.Error("fsync queue", "err", err)
		}
		if !q.post(cmd{kind: cSynced, pubs: confirms, err: err}, 0) {
			q.sendConfirms(confirms, err == nil)
		}
	})
}

// sendConfirms groups confirms by publisher.
func (q *Classic) sendConfirms(pubs []Publish, ok bool) {
	if len(pubs) == 0 {
		return
	}
	if len(pubs) == 1 {
		pubs[0].Confirm.Confirm([]uint64{pubs[0].Tag}, ok)
		return
	}
	type group struct {
		c    Confirmer
		tags []uint64
	}
	var groups []group
	for _, p := range pubs {
		i := 0
		for i < len(groups) && groups[i].c != p.Confirm {
			i++
		}
		if i == len(groups) {
			groups = append(groups, group{c: p.Confirm})
		}
		groups[i].tags = append(groups[i].tags, p.Tag)
	}
	for _, g := range groups {
		g.c.Confirm(g.tags, ok)
	}
}

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

// enqueue adds a published message. It returns the entry to write (nil
// when nothing is written), whether its confirm waits for fsync, and whether
// the queue refused it (reject-publish overflow; already nacked).
func (q *Classic) enqueue(p Publish) (*store.Entry, bool, bool) {
	s := &q.st
	q.sPublished.Add(1)
	if q.args.Overflow != "drop-head" && q.full(len(p.Msg.Body)) {
		if p.Confirm != nil {
			p.Confirm.Confirm([]uint64{p.Tag}, false)
		}
		if q.args.Overflow == "reject-publish-dlx" {
			q.deadLetter([]*message.Message{p.Msg}, "maxlen")
		}
		return nil, false, true
	}
	m := &qmsg{seq: s.nextSeq, msg: p.Msg}
	s.nextSeq++
	durable := q.info.Durable && p.Msg.Persistent
	spill := s.diskCount > 0 || (len(s.ready)-s.head >= q.cfg.MemoryMessages || s.readyBytes >= windowBytes) && q.args.MaxPriority == 0
	var w *store.Entry
	if durable || spill {
		m.inIndex = true
		w = &store.Entry{Seq: m.seq, ID: store.MsgID(p.Msg.ID), Persistent: durable, Data: p.Msg.Encode(make([]byte, 0, p.Msg.EncodedSize()))}
	}
	if spill {
		if s.diskCount == 0 {
			s.diskFrom = m.seq
		}
		s.diskCount++
		s.diskBytes += int64(len(p.Msg.Body))
		return w, durable, false
	}
	q.pushReady(m)
	return w, durable, false
}

func (q *Classic) full(extra int) bool {
	s := &q.st
	n := int64(len(s.ready) - s.head + s.diskCount)
	if q.args.MaxLength >= 0 && n >= q.args.MaxLength {
		return true
	}
	return q.args.MaxLengthBytes >= 0 && s.readyBytes+s.diskBytes+int64(extra) > q.args.MaxLengthBytes
}

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

// deliver hands ready messages to consumers with credit, round robin.
// deliver hands ready messages to consumers with credit, then flushes
// each consumer that got some: one socket write per consumer and turn.
func (q *Classic) deliver() {
	q.deliverReady()
	for _, cs := range q.st.consumers {
		if cs.flush {
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
			}
		}
		s.rr++
		if !progressed {
			return
		}
	}
}

// forget removes a settled message from the index.
func (q *Classic) forget(m *qmsg) {
	if m.inIndex {
		if err := q.idx.Ack([]uint64{m.seq}); err != nil {
			q.log.Error("ack in queue index", "err", err)
		}
	}
	q.sAcked.Add(1)
}

func (q *Classic) settle(seqs []uint64, reject bool) {
	s := &q.st
	var indexed, transient []uint64
	var dead []*message.Message
	for _, seq := range seqs {
		u, ok := s.unacked[seq]
		if !ok {
			continue
		}
		delete(s.unacked, seq)
		s.unackedB -= int64(len(u.m.msg.Body))
		if u.cons != nil {
			u.cons.unacked--
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

func (q *Classic) requeue(seqs []uint64) {
	s := &q.st
	for _, seq := range seqs {
		u, ok := s.unacked[seq]
		if !ok {
			continue
		}
		delete(s.unacked, seq)
		s.unackedB -= int64(len(u.m.msg.Body))
		if u.cons != nil {
			u.cons.unacked--
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
		} else {
			s.unacked[m.seq] = &unackedMsg{m: m}
			s.unackedB += int64(len(m.msg.Body))
		}
		return d, true
	}
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
	s.expiryTimer = time.AfterFunc(d+time.Millisecond, func() { q.Wake() })
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

func (q *Classic) convert(ctx context.Context, opts store.Options) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := q.idx.Flush(); err != nil {
		return err
	}
	return q.idx.Convert(ctx, opts)
}

// stop ends the queue (the caller replies, then closes q.done). delete removes the files and cancels consumers;
// otherwise the index records a clean shutdown (unacked marked delivered).
func (q *Classic) stop(del bool) int {
	s := &q.st
	n := len(s.ready) - s.head + s.diskCount + len(s.unacked)
	q.mu.Lock()
	q.stopped = true
	if q.drained != nil {
		close(q.drained)
		q.drained = nil
	}
	q.mu.Unlock()
	if s.expiryTimer != nil {
		s.expiryTimer.Stop()
	}
	if del {
		for _, cs := range s.consumers {
			cs.c.Cancelled()
		}
		s.consumers = nil
		if err := q.idx.Delete(); err != nil {
			q.log.Error("delete queue files", "err", err)
		}
	} else {
		// Unacked messages, and requeued ones, were delivered before: they
		// come back redelivered after the restart.
		var delivered []uint64
		for seq, u := range s.unacked {
			if u.m.inIndex {
				delivered = append(delivered, seq)
			}
		}
		for _, m := range s.ready[s.head:] {
			if m.inIndex && m.redelivered {
				delivered = append(delivered, m.seq)
			}
		}
		if len(delivered) > 0 {
			if err := q.idx.MarkDelivered(delivered); err != nil {
				q.log.Error("mark delivered", "err", err)
			}
		}
		if err := q.idx.Close(true); err != nil {
			q.log.Error("close queue index", "err", err)
		}
	}
	return n
}

// failRest answers commands that arrived after the queue stopped.
func (q *Classic) failRest(cmds []cmd) {
	for _, c := range cmds {
		switch {
		case c.reply != nil:
			c.reply <- result{err: ErrDeleted}
		case c.kind == cPublish:
			for _, p := range c.pubs {
				if p.Confirm != nil {
					p.Confirm.Confirm([]uint64{p.Tag}, false)
				}
			}
		case c.kind == cSynced:
			q.sendConfirms(c.pubs, c.err == nil)
		}
	}
	// Commands posted after stop are refused by post.
	q.mu.Lock()
	rest := q.inbox
	q.inbox = nil
	q.mu.Unlock()
	if len(rest) > 0 {
		q.failRest(rest)
	}
}
