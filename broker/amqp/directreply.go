package amqp

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"sync"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/queue"
)

// Direct reply-to, as RabbitMQ's: a requester consumes (no-ack) from the
// pseudo-queue amq.rabbitmq.reply-to on a channel, publishes requests with
// reply_to set to that name, and the channel rewrites it to the channel's
// own reply name, amq.rabbitmq.reply-to.<ref>.<key>. A responder publishes
// the reply to that name through the default exchange, from any
// connection of the vhost, and the reply goes straight to the requester's
// consumer: never stored, not counted against prefetch, never
// acknowledged. A reply to a channel that is gone is unroutable (returned
// if mandatory).
//
// <ref> names the connection and channel (for a reader; nothing looks it
// up) and <key> is 128 random bits: a name cannot be guessed, and only the
// full name, in the same vhost, reaches a channel.

const (
	// replyToQueue is the pseudo-queue a requester consumes from and
	// names in reply_to.
	replyToQueue = "amq.rabbitmq.reply-to"
	// replyNamePrefix starts every channel's reply name.
	replyNamePrefix = replyToQueue + "."
)

// replyConsumer is a channel's amq.rabbitmq.reply-to consumer. Other
// connections' readers deliver to it; its own reader creates and closes it.
type replyConsumer struct {
	name string // amq.rabbitmq.reply-to.<ref>.<key>
	cons consumer

	mu     sync.Mutex // held while a reply is written; closed set under it
	closed bool
}

// replyRegistry maps reply names to their consumers, for the server.
type replyRegistry struct {
	mu sync.RWMutex
	m  map[string]*replyConsumer
}

func (r *replyRegistry) add(rc *replyConsumer) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]*replyConsumer{}
	}
	r.m[rc.name] = rc
	r.mu.Unlock()
}

func (r *replyRegistry) remove(rc *replyConsumer) {
	rc.mu.Lock()
	rc.closed = true
	rc.mu.Unlock()
	r.mu.Lock()
	delete(r.m, rc.name)
	r.mu.Unlock()
}

// lookup returns the consumer of a reply name in the vhost of conn c.
func (r *replyRegistry) lookup(c *conn, name string) *replyConsumer {
	r.mu.RLock()
	rc := r.m[name]
	r.mu.RUnlock()
	if rc == nil || rc.cons.ch.c.vh != c.vh {
		return nil
	}
	return rc
}

// newReplyName returns a fresh reply name for channel ch.
func newReplyName(ch *channel) string {
	var ref [binary.MaxVarintLen64 + 2]byte
	n := binary.PutUvarint(ref[:], ch.c.id)
	binary.BigEndian.PutUint16(ref[n:], ch.id)
	var key [16]byte
	_, _ = rand.Read(key[:])
	enc := base64.RawURLEncoding
	return replyNamePrefix + enc.EncodeToString(ref[:n+2]) + "." + enc.EncodeToString(key[:])
}

// replyConsume is basic.consume from amq.rabbitmq.reply-to: one no-ack
// consumer per channel, as RabbitMQ allows.
func (ch *channel) replyConsume(m *wire.BasicConsume) error {
	tag := m.ConsumerTag
	if tag == "" {
		tag = newConsumerTag()
	}
	if ch.hasConsumerTag(tag) {
		return newError(wire.NotAllowed, "attempt to reuse consumer tag '%s'", tag)
	}
	switch {
	case !m.NoAck:
		return newError(wire.PreconditionFailed, "reply consumer cannot acknowledge")
	case ch.reply != nil:
		return newError(wire.PreconditionFailed, "reply consumer already set")
	}
	rc := &replyConsumer{name: newReplyName(ch), cons: consumer{ch: ch, tag: tag, qt: QueueTypeVolatile, noAck: true}}
	if !m.NoWait {
		ch.c.sendMethod(ch.id, &wire.BasicConsumeOk{ConsumerTag: tag})
	}
	ch.reply = rc
	ch.c.srv.replies.add(rc)
	return nil
}

func (ch *channel) hasConsumerTag(tag string) bool {
	_, dup := ch.consumers[tag]
	return dup || ch.reply != nil && ch.reply.cons.tag == tag
}

// replyCancel ends the channel's reply consumer (basic.cancel, close).
func (ch *channel) replyCancel() {
	if ch.reply != nil {
		ch.c.srv.replies.remove(ch.reply)
		ch.reply = nil
	}
}

// rewriteReplyTo gives a request whose reply_to is amq.rabbitmq.reply-to
// the channel's reply name, as RabbitMQ does; without its reply consumer
// the publish is refused (406). Properties without reply-to cost a look
// at the flags.
func (ch *channel) rewriteReplyTo(props []byte) ([]byte, error) {
	v, ok, err := wire.PropertiesReplyTo(props)
	if err != nil {
		return nil, newError(wire.FrameError, "%v: %v", ErrMalformedProperties, err)
	}
	if !ok || string(v) != replyToQueue {
		return props, nil
	}
	if ch.reply == nil {
		return nil, newError(wire.PreconditionFailed, "fast reply consumer does not exist")
	}
	return wire.ReplaceReplyTo(props, ch.reply.name)
}

// isReplyName reports whether a default-exchange routing key names a
// reply consumer (the one compare ordinary publishes pay).
func isReplyName(exchange, key string) bool {
	return exchange == "" && strings.HasPrefix(key, replyNamePrefix)
}

// sendReply delivers msg, published to a reply name, to its consumer if
// it exists in the publisher's vhost, and reports whether it did. A reply
// is written whatever the consumer's prefetch, unless its connection
// already holds more than Config.OutputBufferLimit for its socket: then
// it is dropped, as RabbitMQ drops replies its consumer has no credit
// for, so a requester that stopped reading cannot grow the broker's
// memory.
func (ch *channel) sendReply(msg *message.Message) bool {
	rc := ch.c.srv.replies.lookup(ch.c, msg.RoutingKey)
	if rc == nil {
		return false
	}
	rc.mu.Lock()
	if rc.closed {
		rc.mu.Unlock()
		return false
	}
	to := rc.cons.ch
	to.mu.Lock()
	to.c.outMu.Lock()
	full := len(to.c.out)+to.c.inflight > to.c.srv.cfg.OutputBufferLimit
	if !full {
		d := queue.Delivery{Msg: msg}
		to.appendDeliveryLocked(rc.cons.tag, &rc.cons, &d, true)
	}
	to.c.outMu.Unlock()
	to.mu.Unlock()
	rc.mu.Unlock()
	if !full {
		to.c.signal()
		ch.c.srv.Counters.ByQueueType[QueueTypeVolatile].ConsumeAutoAck.Add(1) // the reply consumer is no-ack
	}
	return true
}

// routeReply is route for a publish to a reply name.
func (ch *channel) routeReply(msg *message.Message, mandatory bool) error {
	delivered := ch.sendReply(msg)
	if !delivered {
		ch.c.srv.Counters.Unroutable.Add(1)
		if mandatory {
			ch.c.srv.Counters.Returned.Add(1)
			ch.sendReturn(msg, wire.NoRoute, "NO_ROUTE")
		}
	}
	if ch.confirmMode {
		tag := ch.confirms.add(0)
		ch.confirms.Confirm([]uint64{tag}, true)
	}
	return nil
}

// replyDeclare is queue.declare of a name starting amq.rabbitmq.reply-to:
// as RabbitMQ, always passive: the pseudo-queue itself exists, and so does
// a reply name whose channel still consumes; each has one consumer and no
// messages.
func (ch *channel) replyDeclare(m *wire.QueueDeclare) error {
	name := strings.NewReplacer("\r", "", "\n", "").Replace(m.Queue)
	if name != replyToQueue && ch.c.srv.replies.lookup(ch.c, name) == nil {
		return newError(wire.NotFound, "no queue '%s' in vhost '%s'", name, ch.c.vh.Name())
	}
	if !m.NoWait {
		ch.c.sendMethod(ch.id, &wire.QueueDeclareOk{Queue: name, MessageCount: 0, ConsumerCount: 1})
	}
	return nil
}
