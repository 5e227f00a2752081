package queue

import (
	"context"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/store"
)

// loop is the queue goroutine: each turn takes the whole inbox, applies it,
// persists the turn's writes with one Append, asks for one group-commit
// Sync, and delivers to consumers.
func (q *Classic) loop() {
	for {
		<-q.signal
		q.turnMu.Lock()
		q.mu.Lock()
		cmds := q.inbox
		q.inbox = nil
		q.inboxBytes = 0
		q.turnMsgs, q.inboxMsgs = q.inboxMsgs, 0
		q.mu.Unlock()
		stop := q.turn(cmds)
		q.turnMu.Unlock()
		if stop {
			return
		}
	}
}

// publishTurnStats publishes the counters; the turn's publishes are counted
// in sReady from then on, not in turnMsgs (flow control adds both).
func (q *Classic) publishTurnStats() {
	q.publishStats()
	q.mu.Lock()
	q.turnMsgs = 0
	if q.drained != nil {
		close(q.drained)
		q.drained = nil
	}
	q.mu.Unlock()
}

// turn applies commands; it returns true when the queue stopped.
func (q *Classic) turn(cmds []cmd) bool {
	var writes []store.Entry
	var wrote []*qmsg // the messages of writes, in order
	var durableConfirms []Publish
	directConfirms := q.st.directConfirms[:0]
	// written makes the turn's publishes so far durable before a command
	// that takes messages out of the queue (get, purge, a conversion):
	// nothing leaves the queue before its entry is in the index, so a
	// message got or purged is acked there, and a failed write (a full
	// disk) nacks messages no one has seen.
	written := func() {
		q.flushWrites(writes, wrote, durableConfirms)
		writes, wrote, durableConfirms = nil, nil, nil
	}
	for i := range cmds {
		c := &cmds[i]
		switch c.kind {
		case cPublish:
			for _, p := range c.pubs {
				m, w, durable, refused := q.enqueue(p)
				if w != nil {
					writes = append(writes, *w)
					wrote = append(wrote, m)
				}
				if p.Confirm != nil && !refused {
					if durable {
						durableConfirms = append(durableConfirms, p)
					} else {
						directConfirms = append(directConfirms, p)
					}
				}
			}
			if c.enqueued != nil {
				c.enqueued()
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
			written()
			d, ok := q.get(c.noAck)
			c.reply <- result{d: d, ok: ok}
		case cPurge:
			written()
			c.reply <- result{n: q.purge()}
		case cSynced:
			q.sendConfirms(c.pubs, c.err == nil)
		case cSetStorage:
			if c.storeOpt.Version == 0 {
				c.reply <- result{n: q.idx.Version()}
				continue
			}
			written()
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
			q.flushWrites(writes, wrote, durableConfirms)
			q.sendConfirms(directConfirms, true)
			q.stop(false)
			c.reply <- result{}
			close(q.done)
			q.failRest(cmds[i+1:])
			return true
		}
	}
	q.flushWrites(writes, wrote, durableConfirms)
	q.sendConfirms(directConfirms, true)
	q.keepDirectConfirms(directConfirms)
	q.deliver()
	q.enforceLimits()
	q.expireHead()
	q.ackForgotten()
	q.refill()
	q.publishTurnStats()
	q.armExpiry()
	return false
}

// keepDirectConfirms keeps the turn's slice of direct confirms for the
// next turn (a forwarded publish call brings tens of messages a turn, each
// with a confirm), without the confirmers: a big one is let go.
func (q *Classic) keepDirectConfirms(pubs []Publish) {
	if cap(pubs) > maxKeptConfirms {
		q.st.directConfirms = nil
		return
	}
	clear(pubs)
	q.st.directConfirms = pubs[:0]
}

// maxKeptConfirms bounds the direct confirms' slice a queue keeps between
// turns.
const maxKeptConfirms = 4096

// flushWrites appends the turn's entries and requests the group commit
// whose completion confirms durable publishes. The append is written
// through before anything is delivered, and is all or nothing: when it
// fails (the disk is full) the turn's durable messages leave the queue and
// their publishers get nacks, so no consumer ever sees them, and the queue
// carries on (the disk alarm is raised by the store).
func (q *Classic) flushWrites(writes []store.Entry, wrote []*qmsg, confirms []Publish) {
	if len(writes) > 0 {
		if err := q.idx.Append(writes); err != nil {
			q.log.Warn("could not write messages; their publishers are nacked", "messages", len(writes), "err", err)
			q.unwrite(wrote)
			q.sendConfirms(confirms, false)
			return
		}
	}
	if len(writes) == 0 && len(confirms) == 0 {
		return
	}
	if err := q.idx.Flush(); err != nil {
		// The turn's entries were written by Append: this is older
		// buffered work, tried again on the next flush.
		q.log.Error("flush queue index", "err", err)
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

// unwrite takes back the messages of a failed Append: durable ones leave
// the queue (their publishers are nacked); transient ones that were only
// spilled to disk for want of memory stay, in memory, as if published when
// the window had room (their confirms, if any, were sent at enqueue).
func (q *Classic) unwrite(wrote []*qmsg) {
	s := &q.st
	gone := make(map[uint64]bool, len(wrote))
	for _, m := range wrote {
		m.inIndex = false
		if m.spilled {
			m.spilled = false
			s.diskCount--
			s.diskBytes -= int64(len(m.msg.Body))
			if !q.isDurable(m) {
				q.pushReady(m)
			}
			continue
		}
		if q.isDurable(m) {
			gone[m.seq] = true
		}
	}
	if s.diskCount <= 0 {
		s.diskCount, s.diskBytes = 0, 0
	}
	if len(gone) == 0 {
		return
	}
	kept := s.ready[:s.head]
	for _, m := range s.ready[s.head:] {
		if gone[m.seq] {
			s.readyBytes -= int64(len(m.msg.Body))
			continue
		}
		kept = append(kept, m)
	}
	clear(s.ready[len(kept):])
	s.ready = kept
}

func (q *Classic) isDurable(m *qmsg) bool { return q.info.Durable && m.msg.Persistent }

// sendConfirms groups confirms by publisher: one Confirm call each, with
// the publisher's tags in the order published, all groups' tags in one
// buffer (Confirm does not keep them).
func (q *Classic) sendConfirms(pubs []Publish, ok bool) {
	switch len(pubs) {
	case 0:
		return
	case 1:
		pubs[0].Confirm.Confirm([]uint64{pubs[0].Tag}, ok)
		return
	}
	type group struct {
		c     Confirmer
		at, n int
	}
	var few [4]group
	groups := few[:0]
	find := func(c Confirmer) int {
		i := 0
		for i < len(groups) && groups[i].c != c {
			i++
		}
		return i
	}
	for _, p := range pubs {
		i := find(p.Confirm)
		if i == len(groups) {
			groups = append(groups, group{c: p.Confirm})
		}
		groups[i].n++
	}
	at := 0
	for i := range groups {
		groups[i].at, groups[i].n, at = at, 0, at+groups[i].n
	}
	tags := make([]uint64, len(pubs))
	for _, p := range pubs {
		g := &groups[find(p.Confirm)]
		tags[g.at+g.n] = p.Tag
		g.n++
	}
	for _, g := range groups {
		g.c.Confirm(tags[g.at:g.at+g.n:g.at+g.n], ok)
	}
}

// enqueue adds a published message. It returns the message and the entry
// to write (nil when nothing is written), whether its confirm waits for
// fsync, and whether the queue refused it (reject-publish overflow; already
// nacked).
func (q *Classic) enqueue(p Publish) (*qmsg, *store.Entry, bool, bool) {
	s := &q.st
	q.sPublished.Add(1)
	if q.args.Overflow != "drop-head" && q.full(len(p.Msg.Body)) {
		if p.Confirm != nil {
			p.Confirm.Confirm([]uint64{p.Tag}, false)
		}
		if q.args.Overflow == "reject-publish-dlx" {
			q.deadLetter([]*message.Message{p.Msg}, "maxlen")
		}
		return nil, nil, false, true
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
		m.spilled = true
		s.diskCount++
		s.diskBytes += int64(len(p.Msg.Body))
		return m, w, durable, false
	}
	q.pushReady(m)
	return m, w, durable, false
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
		q.ackForgotten()
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
