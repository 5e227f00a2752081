package amqp

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
	"github.com/warrenmq/warren/broker/vhost"
)

type channel struct {
	c       *conn
	id      uint16
	closing bool // sent channel.close, waiting for close-ok (reader only)

	pub publishing // content being assembled (reader only)

	// Publisher confirms and transactions (reader only, except confirms).
	confirmMode bool
	// published is set by the first basic.publish: the channel is a
	// publisher (rabbitmq_global_publishers).
	published atomic.Bool
	txMode    bool
	tx        txState
	confirms  confirmTracker

	// Consumers and unacked deliveries.
	stats          chanStats
	consumers      map[string]*consumer // the reader writes it under mu (setConsumer) and reads it without
	reply          *replyConsumer       // amq.rabbitmq.reply-to consumer, reader only
	prefetchCount  int32                // basic.qos global=false: for consumers created later
	globalPrefetch atomic.Int32         // basic.qos global=true: shared by the channel
	unackedCount   int32                // consumers' deliveries not settled, counted against globalPrefetch; guarded by mu

	mu      sync.Mutex // guards nextTag, unacked, unackedCount, the consumers' unacked and the scratch methods
	nextTag uint64
	unacked unackedList
	// The method deliver encodes, reused: passed as a wire.Method, a new
	// one would be allocated per delivery.
	deliverM wire.BasicDeliver
	getOkM   wire.BasicGetOk
}

func newChannel(c *conn, id uint16) *channel {
	ch := &channel{c: c, id: id, consumers: map[string]*consumer{}}
	ch.confirms.ch = ch
	return ch
}

func (ch *channel) info() ChannelInfo {
	ch.mu.Lock()
	unacked := ch.unacked.len()
	consumers := len(ch.consumers)
	stats := ch.messageStatsLocked()
	prefetch, confirm, tx := ch.prefetchCount, ch.confirmMode, ch.txMode
	ch.mu.Unlock()
	stats.Confirm = ch.confirms.confirmed()
	ci := ChannelInfo{Connection: ch.c.name, Number: ch.id, User: ch.c.user, Unacked: unacked, PrefetchCount: int(prefetch), GlobalPrefetch: int(ch.globalPrefetch.Load()), Confirm: confirm, Transactional: tx, UnconfirmedLen: ch.confirms.pending(), Publisher: ch.published.Load()}
	if ch.c.vh != nil {
		ci.Vhost = ch.c.vh.Name()
	}
	ci.Consumers = consumers
	ci.Stats = stats
	return ci
}

// setConsumer adds (c non-nil) or removes a consumer; the reader calls
// it, under mu so that the HTTP API's lists read the map safely.
func (ch *channel) setConsumer(tag string, c *consumer) {
	ch.mu.Lock()
	if c == nil {
		delete(ch.consumers, tag)
	} else {
		ch.consumers[tag] = c
	}
	ch.mu.Unlock()
}

// consumerInfos describes the channel's consumers for the HTTP API.
func (ch *channel) consumerInfos() []ConsumerInfo {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	out := make([]ConsumerInfo, 0, len(ch.consumers))
	for _, c := range ch.consumers {
		info := c.q.Info()
		out = append(out, ConsumerInfo{Tag: c.tag, Queue: info.Name, Vhost: info.Vhost, Connection: ch.c.name, Channel: ch.id, User: ch.c.user,
			AckRequired: !c.noAck, Exclusive: c.exclusive, Prefetch: int(c.prefetch), Args: c.args})
	}
	return out
}

// soft closes the channel with a soft (channel) error.
func (ch *channel) closeWith(e *Error) {
	ch.shutdown()
	ch.closing = true
	ch.c.sendMethod(ch.id, &wire.ChannelClose{ReplyCode: e.Code, ReplyText: e.Text, ClassId: e.ClassID, MethodId: e.MethodID})
}

// shutdown cancels consumers and requeues unacked messages.
func (ch *channel) shutdown() {
	if ch.c.statsCh == ch {
		ch.c.flushChanStats() // its exchanges keep what it published
	}
	for tag, cons := range ch.consumers {
		cons.q.Cancel(cons)
		ch.setConsumer(tag, nil)
	}
	ch.replyCancel()
	ch.requeueAll()
	ch.tx = txState{}
	ch.pub = publishing{}
}

func (ch *channel) handleFrame(ctx context.Context, f wire.Frame) error {
	if ch.closing {
		if f.Type == wire.FrameMethod {
			m, err := wire.DecodeMethod(f.Payload)
			if err != nil {
				return newError(wire.FrameError, "cannot decode method: %v", err)
			}
			switch m.(type) {
			case *wire.ChannelCloseOk:
				ch.forget()
			case *wire.ChannelClose:
				ch.c.sendMethod(ch.id, &wire.ChannelCloseOk{})
				ch.forget()
			}
		}
		return nil
	}
	var err error
	switch f.Type {
	case wire.FrameMethod:
		if ch.pub.active {
			return newError(wire.UnexpectedFrame, "expected content header for class 60, got non content header frame instead")
		}
		var m wire.Method
		m, err = wire.DecodeMethod(f.Payload)
		if err != nil {
			return newError(wire.FrameError, "cannot decode method on channel %d: %v", ch.id, err)
		}
		// What the client sent before this method reaches the queues
		// first, so that it sees their effect. Publishes and settlements
		// (ack, nack, reject) need not: they keep batching, and acks of a
		// whole read go to each queue in one hand-over.
		switch m.(type) {
		case *wire.BasicPublish, *wire.BasicAck, *wire.BasicNack, *wire.BasicReject:
		default:
			if err := ch.c.flushPublishes(ctx); err != nil {
				return err
			}
		}
		err = ch.handleMethod(ctx, m)
		if e, ok := err.(*Error); ok && e.ClassID == 0 {
			e.ClassID, e.MethodID = m.ClassID(), m.MethodID()
		}
	case wire.FrameHeader:
		err = ch.handleHeader(ctx, f.Payload)
	case wire.FrameBody:
		err = ch.handleBody(ctx, f.Payload)
	}
	if err == nil {
		return nil
	}
	e := fromErr(err)
	if !e.Hard {
		ch.closeWith(e)
		return nil
	}
	return e
}

func (ch *channel) forget() {
	ch.c.chMu.Lock()
	_, ok := ch.c.channels[ch.id]
	delete(ch.c.channels, ch.id)
	ch.c.chMu.Unlock()
	if ok {
		ch.c.srv.cfg.Churn.ChannelsClosed.Add(1)
	}
}

func (ch *channel) handleMethod(ctx context.Context, m wire.Method) error {
	switch m := m.(type) {
	case *wire.ChannelClose:
		ch.shutdown()
		ch.forget()
		ch.c.sendMethod(ch.id, &wire.ChannelCloseOk{})
		return nil
	case *wire.ChannelCloseOk:
		ch.forget()
		return nil
	case *wire.ChannelOpen:
		return newError(wire.ChannelError, "second 'channel.open' seen")
	case *wire.ChannelFlow:
		// As RabbitMQ: a client may not stop the server's deliveries with
		// channel.flow (prefetch does that); active=false is a connection
		// error, active=true a no-op.
		if !m.Active {
			return newError(wire.NotImplemented, "active=false")
		}
		ch.c.sendMethod(ch.id, &wire.ChannelFlowOk{Active: true})
		return nil
	case *wire.ExchangeDeclare:
		return ch.exchangeDeclare(ctx, m)
	case *wire.ExchangeDelete:
		return ch.exchangeDelete(ctx, m)
	case *wire.ExchangeBind:
		return ch.exchangeBind(ctx, m.Destination, m.Source, m.RoutingKey, m.Arguments, m.NoWait, true)
	case *wire.ExchangeUnbind:
		return ch.exchangeBind(ctx, m.Destination, m.Source, m.RoutingKey, m.Arguments, m.NoWait, false)
	case *wire.QueueDeclare:
		return ch.queueDeclare(ctx, m)
	case *wire.QueueBind:
		return ch.queueBind(ctx, m.Queue, m.Exchange, m.RoutingKey, m.Arguments, m.NoWait, true)
	case *wire.QueueUnbind:
		return ch.queueBind(ctx, m.Queue, m.Exchange, m.RoutingKey, m.Arguments, false, false)
	case *wire.QueuePurge:
		return ch.queuePurge(ctx, m)
	case *wire.QueueDelete:
		return ch.queueDelete(ctx, m)
	case *wire.BasicQos:
		return ch.basicQos(m)
	case *wire.BasicConsume:
		return ch.basicConsume(ctx, m)
	case *wire.BasicCancel:
		return ch.basicCancel(m)
	case *wire.BasicPublish:
		return ch.basicPublish(m)
	case *wire.BasicGet:
		return ch.basicGet(ctx, m)
	case *wire.BasicAck:
		return ch.basicAck(m.DeliveryTag, m.Multiple)
	case *wire.BasicNack:
		return ch.basicReject(m.DeliveryTag, m.Multiple, m.Requeue)
	case *wire.BasicReject:
		return ch.basicReject(m.DeliveryTag, false, m.Requeue)
	case *wire.BasicRecover:
		ch.requeueAll()
		ch.c.sendMethod(ch.id, &wire.BasicRecoverOk{})
		return nil
	case *wire.BasicRecoverAsync:
		ch.requeueAll()
		return nil
	case *wire.ConfirmSelect:
		if ch.txMode {
			return newError(wire.PreconditionFailed, "cannot switch from tx to confirm mode")
		}
		ch.mu.Lock() // info reads it from the HTTP API's goroutines
		ch.confirmMode = true
		ch.mu.Unlock()
		if !m.Nowait {
			ch.c.sendMethod(ch.id, &wire.ConfirmSelectOk{})
		}
		return nil
	case *wire.TxSelect:
		if ch.confirmMode {
			return newError(wire.PreconditionFailed, "cannot switch from confirm to tx mode")
		}
		ch.mu.Lock()
		ch.txMode = true
		ch.mu.Unlock()
		ch.c.sendMethod(ch.id, &wire.TxSelectOk{})
		return nil
	case *wire.TxCommit:
		return ch.txCommit(ctx)
	case *wire.TxRollback:
		if !ch.txMode {
			return newError(wire.PreconditionFailed, "channel is not transactional")
		}
		ch.tx = txState{}
		ch.c.sendMethod(ch.id, &wire.TxRollbackOk{})
		return nil
	}
	return newError(wire.CommandInvalid, "unexpected method '%s' on a channel", m.Name())
}

// access checks a permission; kind is "configure", "write" or "read".
func (ch *channel) access(kind meta.Access, resourceKind, name string) error {
	if ch.c.perm.Check(kind, name) {
		return nil
	}
	return newError(wire.AccessRefused, "access to %s '%s' in vhost '%s' refused for user '%s'", resourceKind, name, ch.c.vh.Name(), ch.c.user)
}

func (ch *channel) exchangeDeclare(ctx context.Context, m *wire.ExchangeDeclare) error {
	if !m.Passive {
		if err := ch.access(meta.Configure, "exchange", m.Exchange); err != nil {
			return err
		}
	}
	d := vhost.ExchangeDecl{Name: m.Exchange, Type: m.Type, Passive: m.Passive, Durable: m.Durable, AutoDelete: m.AutoDelete, Internal: m.Internal, Args: m.Arguments}
	if !m.Passive {
		d.Authorize = func(alternate string) error { return ch.authorizeNewExchange(m.Exchange, alternate) }
	}
	err := ch.c.vh.DeclareExchange(ctx, d)
	if err != nil {
		return fromErr(err)
	}
	if !m.NoWait {
		ch.c.sendMethod(ch.id, &wire.ExchangeDeclareOk{})
	}
	return nil
}

func (ch *channel) exchangeDelete(ctx context.Context, m *wire.ExchangeDelete) error {
	if err := ch.access(meta.Configure, "exchange", m.Exchange); err != nil {
		return err
	}
	if err := ch.c.vh.DeleteExchange(ctx, m.Exchange, m.IfUnused); err != nil {
		return fromErr(err)
	}
	if !m.NoWait {
		ch.c.sendMethod(ch.id, &wire.ExchangeDeleteOk{})
	}
	return nil
}

func (ch *channel) exchangeBind(ctx context.Context, dst, src, key string, args wire.Table, noWait, bind bool) error {
	if err := ch.access(meta.Write, "exchange", dst); err != nil {
		return err
	}
	if err := ch.access(meta.Read, "exchange", src); err != nil {
		return err
	}
	b := routing.Binding{Source: src, Destination: dst, ToExchange: true, Key: key, Args: args}
	var err error
	if bind {
		err = ch.c.vh.Bind(ctx, b)
	} else {
		err = ch.c.vh.Unbind(ctx, b)
	}
	if err != nil {
		return fromErr(err)
	}
	if !noWait {
		if bind {
			ch.c.sendMethod(ch.id, &wire.ExchangeBindOk{})
		} else {
			ch.c.sendMethod(ch.id, &wire.ExchangeUnbindOk{})
		}
	}
	return nil
}

func (ch *channel) queueDeclare(ctx context.Context, m *wire.QueueDeclare) error {
	if strings.HasPrefix(m.Queue, replyToQueue) {
		return ch.replyDeclare(m)
	}
	if !m.Passive && m.Queue != "" {
		if err := ch.access(meta.Configure, "queue", m.Queue); err != nil {
			return err
		}
	}
	d := vhost.QueueDecl{Name: m.Queue, Passive: m.Passive, Durable: m.Durable, Exclusive: m.Exclusive, AutoDelete: m.AutoDelete, Args: m.Arguments, Owner: ch.c.id}
	if !m.Passive {
		serverNamed := m.Queue == ""
		d.Authorize = func(name string, args queue.Args) error { return ch.authorizeNewQueue(name, serverNamed, args) }
	}
	q, _, err := ch.c.vh.DeclareQueue(ctx, d)
	if err != nil {
		return fromErr(err)
	}
	if !m.NoWait {
		st := q.Stats()
		ch.c.sendMethod(ch.id, &wire.QueueDeclareOk{Queue: q.Info().Name, MessageCount: uint32(st.Ready), ConsumerCount: uint32(st.Consumers)})
	}
	return nil
}

// authorizeNewExchange checks, as RabbitMQ does when an exchange is
// created (not when it exists), that a user who gives it an alternate
// exchange may read from the new exchange and write to the alternate one:
// unroutable messages must not reach, through it, an exchange the user may
// not publish to. A policy's alternate exchange is not checked (nor is it
// by RabbitMQ): policies are set by their own, privileged, users.
func (ch *channel) authorizeNewExchange(name, alternate string) error {
	if alternate == "" {
		return nil
	}
	if err := ch.access(meta.Read, "exchange", name); err != nil {
		return err
	}
	return ch.access(meta.Write, "exchange", alternate)
}

// authorizeNewQueue checks what RabbitMQ checks before it creates a queue:
// configure on a server-generated name (a named queue's was checked before
// the declare), and, when the arguments give a dead-letter exchange, read
// on the queue and write on that exchange: expired or rejected messages
// must not reach an exchange the user may not publish to. As with
// RabbitMQ, a policy's dead-letter exchange is not checked.
func (ch *channel) authorizeNewQueue(name string, serverNamed bool, args queue.Args) error {
	if serverNamed {
		if err := ch.access(meta.Configure, "queue", name); err != nil {
			return err
		}
	}
	if args.DeadLetterExchange == nil {
		return nil
	}
	if err := ch.access(meta.Read, "queue", name); err != nil {
		return err
	}
	return ch.access(meta.Write, "exchange", *args.DeadLetterExchange)
}

func (ch *channel) queueBind(ctx context.Context, qname, exchange, key string, args wire.Table, noWait, bind bool) error {
	if strings.HasPrefix(qname, replyNamePrefix) {
		return newError(wire.AccessRefused, "cannot bind or unbind to a volatile (direct reply-to) queue")
	}
	if err := ch.access(meta.Write, "queue", qname); err != nil {
		return err
	}
	if err := ch.access(meta.Read, "exchange", exchange); err != nil {
		return err
	}
	if _, err := ch.c.vh.QueueRecord(ctx, qname, ch.c.id); err != nil {
		return fromErr(err)
	}
	b := routing.Binding{Source: exchange, Destination: qname, Key: key, Args: args}
	var err error
	if bind {
		err = ch.c.vh.Bind(ctx, b)
	} else {
		err = ch.c.vh.Unbind(ctx, b)
	}
	if err != nil {
		return fromErr(err)
	}
	if bind && !noWait {
		ch.c.sendMethod(ch.id, &wire.QueueBindOk{})
	} else if !bind {
		ch.c.sendMethod(ch.id, &wire.QueueUnbindOk{})
	}
	return nil
}

func (ch *channel) queuePurge(ctx context.Context, m *wire.QueuePurge) error {
	if err := ch.access(meta.Read, "queue", m.Queue); err != nil {
		return err
	}
	q, err := ch.c.vh.Queue(ctx, m.Queue, ch.c.id)
	if err != nil {
		return fromErr(err)
	}
	n, err := q.Purge(ctx)
	if err != nil {
		return fromErr(err)
	}
	if !m.NoWait {
		ch.c.sendMethod(ch.id, &wire.QueuePurgeOk{MessageCount: uint32(n)})
	}
	return nil
}

func (ch *channel) queueDelete(ctx context.Context, m *wire.QueueDelete) error {
	if err := ch.access(meta.Configure, "queue", m.Queue); err != nil {
		return err
	}
	n, err := ch.c.vh.DeleteQueue(ctx, m.Queue, vhost.QueueDeleteOptions{IfUnused: m.IfUnused, IfEmpty: m.IfEmpty, Owner: ch.c.id})
	if err != nil {
		return fromErr(err)
	}
	if !m.NoWait {
		ch.c.sendMethod(ch.id, &wire.QueueDeleteOk{MessageCount: uint32(n)})
	}
	return nil
}
