package queue

import (
	"bytes"
	"encoding/binary"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/amqp10"
	"github.com/warrenmq/warren/broker/message"
)

// streamConverter turns stored AMQP 1.0 messages into AMQP 0.9.1 ones for
// one consumer. Messages from one publisher usually differ only in their
// body: when the bytes before the body are those of the previous message,
// the previous properties are reused with the new x-stream-offset patched
// in, and nothing is decoded.
type streamConverter struct {
	m      amqp10.Message
	reuse  bool   // prefix holds the previous message's bytes before its body
	prefix []byte // (none for a message that is only a data section)
	props  []byte
	offPos int // where x-stream-offset's value is in props
}

func (c *streamConverter) convert(msg *message.Message, data []byte, off uint64) {
	if c.reuse && len(data) > len(c.prefix) && bytes.Equal(data[:len(c.prefix)], c.prefix) {
		if body, ok := amqp10.DataBody(data[len(c.prefix):]); ok {
			binary.BigEndian.PutUint64(c.props[c.offPos:], off)
			c.set(msg, body)
			return
		}
	}
	if err := amqp10.DecodeInto(&c.m, data); err != nil {
		// Not an AMQP 1.0 message (a stream client may publish anything):
		// deliver the bytes as they are.
		c.m = amqp10.Message{Body: data, BodyAt: -1}
	}
	c.props, c.offPos = appendPropsWithOffset(c.props[:0], &c.m.Props, off)
	c.reuse = c.m.BodyAt >= 0
	c.prefix = c.prefix[:0]
	if c.reuse {
		c.prefix = append(c.prefix, data[:c.m.BodyAt]...)
	}
	c.set(msg, c.m.Body)
}

// set makes msg the converted message with body. Field by field, on
// purpose: a composite literal is built on the stack and copied, and
// copying a struct just written field by field stalls the CPU's store
// forwarding (measurable on this path, which runs once per message).
// TestStreamConverterSetsEveryField keeps it in step with message.Message.
func (c *streamConverter) set(msg *message.Message, body []byte) {
	msg.ID = 0
	msg.Exchange = c.m.Exchange
	msg.RoutingKey = c.m.RoutingKey
	msg.Props = c.props
	msg.Body = body
	msg.Persistent = false
	msg.Priority = 0
	msg.Expiry = 0
	msg.Timestamp = 0
}

const streamOffsetHeader = "x-stream-offset"

// appendPropsWithOffset encodes p with the header x-stream-offset (a long,
// as RabbitMQ adds it) last in the headers table, and returns where its
// value is.
func appendPropsWithOffset(b []byte, p *wire.Properties, off uint64) ([]byte, int) {
	hdrs := p.Headers
	p.Headers = nil
	raw := p.Append(nil)
	p.Headers = hdrs
	flags := uint16(raw[0])<<8 | uint16(raw[1]) | wire.FlagHeaders
	// Headers come after content-type and content-encoding.
	pos := 2
	if flags&wire.FlagContentType != 0 {
		pos += 1 + int(raw[pos])
	}
	if flags&wire.FlagContentEncoding != 0 {
		pos += 1 + int(raw[pos])
	}
	b = append(b, byte(flags>>8), byte(flags))
	b = append(b, raw[2:pos]...)
	tstart := len(b)
	b = append(b, 0, 0, 0, 0)
	if len(hdrs) > 0 {
		delete(hdrs, streamOffsetHeader)
		t := wire.AppendTable(nil, hdrs)
		b = append(b, t[4:]...)
	}
	b = append(b, byte(len(streamOffsetHeader)))
	b = append(b, streamOffsetHeader...)
	b = append(b, 'l')
	offPos := len(b)
	b = binary.BigEndian.AppendUint64(b, off)
	binary.BigEndian.PutUint32(b[tstart:], uint32(len(b)-tstart-4))
	b = append(b, raw[pos:]...)
	return b, offPos
}
