package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
)

// wireConsumer is the AMQP 0.9.1 consumer of `amqp consume --client wire`:
// one connection, one channel, one consumer with manual acks, written on
// Warren's own frame codec (broker/amqp/wire) instead of amqp091-go. It
// exists for measuring the broker: it reads deliveries straight from its
// socket buffer (no goroutine hand-offs, no allocation per message) and so
// costs a fraction of what amqp091-go does per message, which otherwise
// bounds what a benchmark of small messages can show. It speaks only what
// a consumer needs; the default client stays amqp091-go. Its socket is
// blocking (see blockingSocket).
type wireConsumer struct {
	conn     *blockingSocket
	r        *wire.Reader
	out      []byte
	frameMax uint32
}

// wireChannel is the one channel a wireConsumer opens.
const wireChannel = 1

// dialWire connects and authenticates (PLAIN) per uri, opens the vhost and
// channel 1, sets the prefetch and starts consuming queue with args.
func dialWire(ctx context.Context, uri, queue string, qos int, args wire.Table) (*wireConsumer, error) {
	u, err := amqp091.ParseURI(uri)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", uri, err)
	}
	if u.Scheme != "amqp" {
		return nil, fmt.Errorf("--client wire speaks plain amqp://, not %s", u.Scheme)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", uri, err)
	}
	sock, err := newBlockingSocket(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c := &wireConsumer{conn: sock, r: wire.NewReader(sock, 256<<10), frameMax: wire.FrameMinSize}
	stop := context.AfterFunc(ctx, sock.Abort)
	defer stop()
	if err := c.handshake(u, queue, qos, args); err != nil {
		sock.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect %s: %w", uri, ctx.Err())
		}
		return nil, err
	}
	return c, nil
}

func (c *wireConsumer) handshake(u amqp091.URI, queue string, qos int, args wire.Table) error {
	if _, err := c.conn.Write([]byte(wire.ProtocolHeader)); err != nil {
		return fmt.Errorf("send protocol header: %w", err)
	}
	if _, err := expect[*wire.ConnectionStart](c); err != nil {
		return err
	}
	err := c.send(&wire.ConnectionStartOk{
		ClientProperties: wire.Table{"product": "warren-perf", "capabilities": wire.Table{"consumer_cancel_notify": true}},
		Mechanism:        "PLAIN",
		Response:         "\x00" + u.Username + "\x00" + u.Password,
		Locale:           "en_US",
	})
	if err != nil {
		return err
	}
	tune, err := expect[*wire.ConnectionTune](c)
	if err != nil {
		return err
	}
	c.frameMax = 128 << 10
	if tune.FrameMax != 0 {
		c.frameMax = min(c.frameMax, tune.FrameMax)
	}
	c.r.SetMaxFrameSize(c.frameMax)
	// No heartbeats: the consumer reads all the time, and a run is short.
	if err := c.send(&wire.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: c.frameMax}); err != nil {
		return err
	}
	if err := c.send(&wire.ConnectionOpen{VirtualHost: u.Vhost}); err != nil {
		return err
	}
	if _, err := expect[*wire.ConnectionOpenOk](c); err != nil {
		return err
	}
	c.out = wire.AppendMethodFrame(c.out[:0], wireChannel, &wire.ChannelOpen{})
	if err := c.flushTo(); err != nil {
		return err
	}
	if _, err := expect[*wire.ChannelOpenOk](c); err != nil {
		return err
	}
	c.out = wire.AppendMethodFrame(c.out[:0], wireChannel, &wire.BasicQos{PrefetchCount: uint16(qos)})
	if err := c.flushTo(); err != nil {
		return err
	}
	if _, err := expect[*wire.BasicQosOk](c); err != nil {
		return err
	}
	c.out = wire.AppendMethodFrame(c.out[:0], wireChannel, &wire.BasicConsume{Queue: queue, ConsumerTag: "warren-perf", Arguments: args})
	if err := c.flushTo(); err != nil {
		return err
	}
	_, err = expect[*wire.BasicConsumeOk](c)
	return err
}

// send writes one method on channel 0.
func (c *wireConsumer) send(m wire.Method) error {
	c.out = wire.AppendMethodFrame(c.out[:0], 0, m)
	return c.flushTo()
}

func (c *wireConsumer) flushTo() error {
	if _, err := c.conn.Write(c.out); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	c.out = c.out[:0]
	return nil
}

// expect reads the next method frame and returns it as M, or an error for
// a close (with the broker's reply) or any other method.
func expect[M wire.Method](c *wireConsumer) (M, error) {
	var zero M
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			return zero, fmt.Errorf("read: %w", err)
		}
		if f.Type == wire.FrameHeartbeat {
			continue
		}
		if f.Type != wire.FrameMethod {
			return zero, fmt.Errorf("frame type %d where a %T was expected", f.Type, zero)
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return zero, fmt.Errorf("decode: %w", err)
		}
		if got, ok := m.(M); ok {
			return got, nil
		}
		return zero, closeError(m, fmt.Sprintf("%T", zero))
	}
}

// closeError describes a method that ended the conversation.
func closeError(m wire.Method, want string) error {
	switch m := m.(type) {
	case *wire.ConnectionClose:
		return fmt.Errorf("connection closed by the broker: %d %s", m.ReplyCode, m.ReplyText)
	case *wire.ChannelClose:
		return fmt.Errorf("channel closed by the broker: %d %s", m.ReplyCode, m.ReplyText)
	case *wire.BasicCancel:
		return errors.New("consumer cancelled by the broker")
	}
	return fmt.Errorf("unexpected %T where %s was expected", m, want)
}

// next reads frames until a whole message is in and returns its body size
// and delivery tag. The body is not kept.
func (c *wireConsumer) next() (size int64, tag uint64, err error) {
	remaining := int64(-1) // -1: waiting for the content header
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			return 0, 0, fmt.Errorf("read: %w", err)
		}
		switch f.Type {
		case wire.FrameMethod:
			p := f.Payload
			if len(p) >= 5 && binary.BigEndian.Uint16(p) == wire.ClassBasic && binary.BigEndian.Uint16(p[2:]) == 60 {
				at := 5 + int(p[4]) // after the consumer tag
				if len(p) < at+8 {
					return 0, 0, errors.New("short basic.deliver")
				}
				tag, remaining = binary.BigEndian.Uint64(p[at:]), -1
				continue
			}
			m, err := wire.DecodeMethod(p)
			if err != nil {
				return 0, 0, fmt.Errorf("decode: %w", err)
			}
			return 0, 0, closeError(m, "basic.deliver")
		case wire.FrameHeader:
			if len(f.Payload) < 12 {
				return 0, 0, errors.New("short content header")
			}
			size = int64(binary.BigEndian.Uint64(f.Payload[4:]))
			if remaining = size; remaining == 0 {
				return size, tag, nil
			}
		case wire.FrameBody:
			if remaining -= int64(len(f.Payload)); remaining <= 0 {
				return size, tag, nil
			}
		}
	}
}

// ack acknowledges every delivery up to tag.
func (c *wireConsumer) ack(tag uint64) error {
	c.out = wire.AppendMethodFrame(c.out[:0], wireChannel, &wire.BasicAck{DeliveryTag: tag, Multiple: true})
	return c.flushTo()
}

func (c *wireConsumer) Close() error { return c.conn.Close() }
