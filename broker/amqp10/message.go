package amqp10

import (
	"fmt"
	"strconv"
	"time"

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
	d := &decoder{b: msg}
	var dataParts int
	for d.p < len(d.b) && d.err == nil {
		start := d.p
		if d.u8() != tDescribed {
			d.fail("section without descriptor at %d", start)
			break
		}
		desc := d.value(1)
		code, ok := sectionCode(desc)
		if !ok {
			d.fail("unknown section descriptor %v", desc)
			break
		}
		switch code {
		case secHeader:
			if l, ok := d.value(1).([]any); ok {
				if len(l) > 0 && l[0] == true {
					m.Props.DeliveryMode = 2
				} else {
					m.Props.DeliveryMode = 1
				}
				if len(l) > 1 {
					if pr, ok := l[1].(uint8); ok {
						m.Props.Priority = pr
					}
				}
			}
		case secDeliveryAnn, secFooter:
			d.value(1)
		case secMessageAnn:
			mp, _ := d.value(1).(map[any]any)
			for k, v := range mp {
				ks := keyString(k)
				vs, _ := v.(string)
				switch ks {
				case annExchange:
					m.Exchange = vs
				case annRoutingKey:
					m.RoutingKey = vs
				case annType:
					m.Props.Type = vs
				case annAppID:
					m.Props.AppId = vs
				case annClusterID:
					m.Props.ClusterId = vs
				case annHeaders:
					if raw, ok := v.([]byte); ok {
						if t, _, err := wire.DecodeTable(raw); err == nil {
							if m.Props.Headers == nil {
								m.Props.Headers = wire.Table{}
							}
							for k, v := range t {
								m.Props.Headers[k] = v
							}
						}
					}
				}
			}
		case secProperties:
			l, _ := d.value(1).([]any)
			get := func(i int) any {
				if i < len(l) {
					return l[i]
				}
				return nil
			}
			m.Props.MessageId = idString(get(0))
			if u, ok := get(1).([]byte); ok {
				m.Props.UserId = string(u)
			}
			m.Props.ReplyTo = idString(get(4))
			m.Props.CorrelationId = idString(get(5))
			m.Props.ContentType = idString(get(6))
			m.Props.ContentEncoding = idString(get(7))
			if t, ok := get(9).(time.Time); ok {
				m.Props.Timestamp = uint64(t.Unix())
			}
		case secAppProps:
			mp, _ := d.value(1).(map[any]any)
			if len(mp) > 0 && m.Props.Headers == nil {
				m.Props.Headers = make(wire.Table, len(mp))
			}
			for k, v := range mp {
				m.Props.Headers[keyString(k)] = headerValue(v)
			}
		case secData:
			v := d.value(1)
			data, ok := v.([]byte)
			if !ok {
				d.fail("data section is %T", v)
				break
			}
			if dataParts == 0 {
				m.Body = data
			} else {
				m.Body = append(m.Body[:len(m.Body):len(m.Body)], data...)
			}
			dataParts++
		case secValue:
			vs := d.p
			switch v := d.value(1).(type) {
			case []byte:
				m.Body = v
			case string:
				m.Body = []byte(v)
			default:
				m.Body = d.b[vs:d.p]
			}
		case secSequence:
			vs := d.p
			d.value(1)
			m.Body = append(m.Body, d.b[vs:d.p]...)
		}
	}
	if d.err != nil {
		return Message{}, d.err
	}
	return m, nil
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
