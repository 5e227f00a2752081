package amqp10

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/warrenmq/warren/broker/amqp/wire"
)

// Message annotation keys for what AMQP 0.9.1 has and AMQP 1.0's
// properties do not.
const (
	annExchange   = "x-exchange"
	annRoutingKey = "x-routing-key"
	annType       = "x-basic-type"
	annAppID      = "x-basic-app-id"
	annClusterID  = "x-basic-cluster-id"
	annHeaders    = "x-basic-headers" // headers whose values are tables or arrays
)

// Message is an AMQP 1.0 message as an AMQP 0.9.1 consumer sees it.
type Message struct {
	Props      wire.Properties
	Body       []byte // aliases the encoded message when it is one data section
	Exchange   string // from the x-exchange annotation ("" if absent)
	RoutingKey string // from the x-routing-key annotation ("" if absent)
	// BodyAt is where the body's section starts in the encoded message when
	// the body is one data section that ends the message (-1 otherwise):
	// messages with the same bytes before BodyAt decode to the same
	// properties (see DataBody).
	BodyAt int
}

// DataBody returns the body of b, the bytes of a message from its BodyAt
// on: one data section and nothing after it.
func DataBody(b []byte) ([]byte, bool) {
	// The encodings every client uses (a small-ulong descriptor and a
	// vbin8 or vbin32) without the decoder: a stream consumer calls this
	// once per message.
	if len(b) >= 5 && b[0] == tDescribed && b[1] == tSmallUlong && b[2] == secData {
		switch {
		case b[3] == tVbin8 && len(b) == 5+int(b[4]):
			return b[5:], true
		case b[3] == tVbin32 && len(b) >= 8 && uint64(len(b)) == 8+uint64(binary.BigEndian.Uint32(b[4:])):
			return b[8:], true
		}
	}
	d := &decoder{b: b}
	if d.u8() != tDescribed {
		return nil, false
	}
	if c, ok := d.sectionDescriptor(); !ok || c != secData {
		return nil, false
	}
	body, ok := d.text()
	if !ok || d.err != nil || d.p != len(b) {
		return nil, false
	}
	return body, true
}

// AppendFromAMQP091 appends the AMQP 1.0 encoding of an AMQP 0.9.1 message
// (its decoded properties, exchange, routing key and body) to b: header
// (durable, priority, ttl from expiration), message annotations
// (x-exchange, x-routing-key, and the 0.9.1 properties AMQP 1.0 lacks),
// properties, application properties (the headers with simple values) and
// one data section with the body.
func AppendFromAMQP091(b []byte, p *wire.Properties, exchange, routingKey string, body []byte) []byte {
	// header: durable, priority, ttl
	b = appendDescriptor(b, secHeader)
	b, hs := beginCompound(b, tList32)
	n := 1
	if p.DeliveryMode == 2 {
		b = append(b, tTrue)
	} else {
		b = append(b, tFalse)
	}
	if p.Priority != 0 || p.Expiration != "" {
		b = append(b, tUbyte, p.Priority)
		n++
	}
	if ttl, err := strconv.ParseUint(p.Expiration, 10, 32); err == nil && p.Expiration != "" {
		b = append(b, tUint, byte(ttl>>24), byte(ttl>>16), byte(ttl>>8), byte(ttl))
		n++
	}
	b = endCompound(b, hs, n)

	// message annotations
	b = appendDescriptor(b, secMessageAnn)
	b, ms := beginCompound(b, tMap32)
	n = 0
	ann := func(k, v string) {
		b = appendSymbol(b, k)
		b = appendString(b, v)
		n += 2
	}
	ann(annExchange, exchange)
	ann(annRoutingKey, routingKey)
	if p.Type != "" {
		ann(annType, p.Type)
	}
	if p.AppId != "" {
		ann(annAppID, p.AppId)
	}
	if p.ClusterId != "" {
		ann(annClusterID, p.ClusterId)
	}
	var complexHeaders []string
	for k, v := range p.Headers {
		if _, ok := appendSimple(nil, v); !ok {
			complexHeaders = append(complexHeaders, k)
		}
	}
	if len(complexHeaders) > 0 {
		t := make(wire.Table, len(complexHeaders))
		for _, k := range complexHeaders {
			t[k] = p.Headers[k]
		}
		// Tables and arrays keep their AMQP 0.9.1 encoding, as binary.
		b = appendSymbol(b, annHeaders)
		b = appendBinary(b, wire.AppendTable(nil, t))
		n += 2
	}
	b = endCompound(b, ms, n)

	// properties: message-id, user-id, to, subject, reply-to,
	// correlation-id, content-type, content-encoding, absolute-expiry-time,
	// creation-time
	b = appendDescriptor(b, secProperties)
	b, ps := beginCompound(b, tList32)
	str := func(s string) {
		if s == "" {
			b = append(b, tNull)
		} else {
			b = appendString(b, s)
		}
	}
	sym := func(s string) {
		if s == "" {
			b = append(b, tNull)
		} else {
			b = appendSymbol(b, s)
		}
	}
	str(p.MessageId)
	if p.UserId == "" {
		b = append(b, tNull)
	} else {
		b = appendBinary(b, []byte(p.UserId))
	}
	b = append(b, tNull, tNull) // to, subject
	str(p.ReplyTo)
	str(p.CorrelationId)
	sym(p.ContentType)
	sym(p.ContentEncoding)
	b = append(b, tNull) // absolute-expiry-time
	if p.Timestamp != 0 {
		b = append(b, tTimestamp)
		ms := uint64(p.Timestamp) * 1000
		b = append(b, byte(ms>>56), byte(ms>>48), byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms))
	} else {
		b = append(b, tNull)
	}
	b = endCompound(b, ps, 10)

	// application properties
	if len(p.Headers) > len(complexHeaders) {
		b = appendDescriptor(b, secAppProps)
		var as int
		b, as = beginCompound(b, tMap32)
		n = 0
		for k, v := range p.Headers {
			// On a compound value, b keeps its length: the key written past
			// it is overwritten by what follows.
			nb, ok := appendSimple(appendString(b, k), v)
			if !ok {
				continue
			}
			b = nb
			n += 2
		}
		b = endCompound(b, as, n)
	}

	// body
	b = appendDescriptor(b, secData)
	return appendBinary(b, body)
}

// Decode parses an AMQP 1.0 message into what an AMQP 0.9.1 consumer
// gets: properties (durable -> delivery mode 2, priority, message-id,
// correlation-id, user-id, reply-to, content-type, content-encoding,
// creation-time -> timestamp, application properties -> headers, and the
// annotations written by AppendFromAMQP091) and the body (data sections
// concatenated; an amqp-value of binary or string as its bytes; any other
// body section as its encoded bytes). It never panics on bad input.
func Decode(msg []byte) (Message, error) {
	var m Message
	err := DecodeInto(&m, msg)
	return m, err
}

// DecodeInto is Decode into m, for a consumer decoding message after
// message: it reuses m's headers map (cleared) and keeps m's strings when
// the new message has the same ones, so a stream of alike messages
// decodes without allocating. Body aliases msg.
func DecodeInto(m *Message, msg []byte) error {
	prev := *m
	hdr := m.Props.Headers
	clear(hdr)
	*m = Message{BodyAt: -1}
	d := &decoder{b: msg}
	set := func(dst *string, old string, b []byte) {
		if string(b) == old {
			*dst = old
		} else {
			*dst = string(b)
		}
	}
	idText := func(dst *string, old string) {
		if c := d.peek(); c == tNull {
			d.p++
			return
		} else if c == tStr8 || c == tStr32 || c == tSym8 || c == tSym32 || c == tVbin8 || c == tVbin32 {
			b, _ := d.text()
			set(dst, old, b)
			return
		}
		*dst = idString(d.value(1))
	}
	dataParts := 0
	for d.p < len(d.b) && d.err == nil {
		sectionAt := d.p
		if d.u8() != tDescribed {
			d.fail("section without descriptor at %d", d.p-1)
			break
		}
		code, ok := d.sectionDescriptor()
		if !ok {
			d.fail("unknown section descriptor")
			break
		}
		switch code {
		case secHeader:
			n, end := d.compoundStart(true)
			m.Props.DeliveryMode = 1
			if n > 0 {
				if d.boolean() {
					m.Props.DeliveryMode = 2
				}
			}
			if n > 1 {
				if d.peek() == tUbyte {
					d.p++
					m.Props.Priority = d.u8()
				} else {
					d.skip(1)
				}
			}
			d.jump(end)
		case secDeliveryAnn, secFooter:
			d.skip(1)
		case secMessageAnn:
			n, end := d.compoundStart(false)
			for i := 0; i < n/2 && d.err == nil && d.p < end; i++ {
				k, ok := d.text()
				if !ok {
					d.skip(1)
					continue
				}
				var dst *string
				var old string
				switch string(k) {
				case annExchange:
					dst, old = &m.Exchange, prev.Exchange
				case annRoutingKey:
					dst, old = &m.RoutingKey, prev.RoutingKey
				case annType:
					dst, old = &m.Props.Type, prev.Props.Type
				case annAppID:
					dst, old = &m.Props.AppId, prev.Props.AppId
				case annClusterID:
					dst, old = &m.Props.ClusterId, prev.Props.ClusterId
				case annHeaders:
					raw, ok := d.text()
					if !ok {
						continue
					}
					if t, _, err := wire.DecodeTable(raw); err == nil {
						if hdr == nil {
							hdr = wire.Table{}
						}
						for k, v := range t {
							hdr[k] = v
						}
					}
					continue
				default:
					d.skip(1)
					continue
				}
				if v, ok := d.text(); ok {
					set(dst, old, v)
				}
			}
			d.jump(end)
		case secProperties:
			n, end := d.compoundStart(true)
			for i := 0; i < n && d.err == nil && d.p < end; i++ {
				switch i {
				case 0:
					idText(&m.Props.MessageId, prev.Props.MessageId)
				case 1:
					idText(&m.Props.UserId, prev.Props.UserId)
				case 4:
					idText(&m.Props.ReplyTo, prev.Props.ReplyTo)
				case 5:
					idText(&m.Props.CorrelationId, prev.Props.CorrelationId)
				case 6:
					idText(&m.Props.ContentType, prev.Props.ContentType)
				case 7:
					idText(&m.Props.ContentEncoding, prev.Props.ContentEncoding)
				case 9:
					if d.peek() == tTimestamp {
						d.p++
						m.Props.Timestamp = uint64(int64(d.u64()) / 1000)
					} else {
						d.skip(1)
					}
				default:
					d.skip(1)
				}
			}
			d.jump(end)
		case secAppProps:
			n, end := d.compoundStart(false)
			if n > 0 && hdr == nil {
				hdr = make(wire.Table, n/2)
			}
			for i := 0; i < n/2 && d.err == nil && d.p < end; i++ {
				k := d.value(1)
				v := d.value(1)
				hdr[keyString(k)] = headerValue(v)
			}
			d.jump(end)
		case secData:
			data, ok := d.text()
			if !ok {
				d.fail("data section is not binary")
				break
			}
			if dataParts == 0 {
				m.Body = data
				if d.p == len(d.b) {
					m.BodyAt = sectionAt
				}
			} else {
				m.Body = append(m.Body[:len(m.Body):len(m.Body)], data...)
			}
			dataParts++
		case secValue:
			vs := d.p
			switch c := d.peek(); c {
			case tStr8, tStr32, tVbin8, tVbin32:
				m.Body, _ = d.text()
			default:
				d.skip(1)
				m.Body = d.b[vs:d.p]
			}
		case secSequence:
			vs := d.p
			d.skip(1)
			m.Body = append(m.Body, d.b[vs:d.p]...)
		}
	}
	if len(hdr) > 0 || prev.Props.Headers != nil {
		m.Props.Headers = hdr
	}
	if d.err != nil {
		return d.err
	}
	return nil
}

// sectionDescriptor reads a section's descriptor (a small ulong, ulong or
// symbol) and returns the section code.
func (d *decoder) sectionDescriptor() (byte, bool) {
	switch c := d.peek(); c {
	case tSmallUlong:
		d.p++
		v := d.u8()
		return v, v >= secHeader && v <= secFooter
	case tUlong:
		d.p++
		v := d.u64()
		return byte(v), v >= secHeader && v <= secFooter
	case tSym8, tSym32:
		b, _ := d.text()
		return sectionCode(Symbol(b))
	}
	return 0, false
}

// boolean reads a boolean (null and other types read as false).
func (d *decoder) boolean() bool {
	c := d.u8()
	switch c {
	case tTrue:
		return true
	case tFalse, tNull:
		return false
	case tBool:
		return d.u8() != 0
	}
	d.skipOf(c, 1)
	return false
}

// jump moves to the end of a compound (its elements may be left unread).
func (d *decoder) jump(end int) {
	if d.err == nil && end >= d.p && end <= len(d.b) {
		d.p = end
	} else if d.err == nil {
		d.fail("compound overrun")
	}
}

func sectionCode(desc any) (byte, bool) {
	switch v := desc.(type) {
	case uint64:
		if v >= secHeader && v <= secFooter {
			return byte(v), true
		}
	case Symbol:
		codes := map[Symbol]byte{
			"amqp:header:list": secHeader, "amqp:delivery-annotations:map": secDeliveryAnn,
			"amqp:message-annotations:map": secMessageAnn, "amqp:properties:list": secProperties,
			"amqp:application-properties:map": secAppProps, "amqp:data:binary": secData,
			"amqp:amqp-sequence:list": secSequence, "amqp:amqp-value:*": secValue, "amqp:footer:map": secFooter,
		}
		c, ok := codes[v]
		return c, ok
	}
	return 0, false
}

func keyString(k any) string {
	switch k := k.(type) {
	case string:
		return k
	case Symbol:
		return string(k)
	}
	return fmt.Sprint(k)
}

// idString renders a message-id/correlation-id (string, ulong, uuid,
// binary) or symbol as the AMQP 0.9.1 short string.
func idString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case Symbol:
		return string(v)
	case []byte:
		return string(v)
	case UUID:
		return v.String()
	}
	return fmt.Sprint(v)
}

// headerValue maps an AMQP 1.0 value to an AMQP 0.9.1 field value.
func headerValue(v any) any {
	switch v := v.(type) {
	case Symbol:
		return string(v)
	case UUID:
		return v.String()
	case uint64:
		return int64(v)
	case uint32:
		return int64(v)
	case map[any]any:
		t := make(wire.Table, len(v))
		for k, x := range v {
			t[keyString(k)] = headerValue(x)
		}
		return t
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = headerValue(x)
		}
		return out
	}
	return v
}
