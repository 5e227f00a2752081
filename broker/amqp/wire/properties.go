package wire

import (
	"encoding/binary"
	"fmt"
)

// Property flags of the basic class, in wire order: bit 15 is the first
// property. Properties.Flags holds a set of them.
const (
	FlagContentType     uint16 = 1 << 15
	FlagContentEncoding uint16 = 1 << 14
	FlagHeaders         uint16 = 1 << 13
	FlagDeliveryMode    uint16 = 1 << 12
	FlagPriority        uint16 = 1 << 11
	FlagCorrelationId   uint16 = 1 << 10
	FlagReplyTo         uint16 = 1 << 9
	FlagExpiration      uint16 = 1 << 8
	FlagMessageId       uint16 = 1 << 7
	FlagTimestamp       uint16 = 1 << 6
	FlagType            uint16 = 1 << 5
	FlagUserId          uint16 = 1 << 4
	FlagAppId           uint16 = 1 << 3
	FlagClusterId       uint16 = 1 << 2

	flagsKnown        = 0xfffc
	flagContinuation  = 1
	contentHeaderSize = 12 // class, weight, body size
)

// ContentHeader is the payload of a content header frame.
type ContentHeader struct {
	ClassID  uint16
	Weight   uint16
	BodySize uint64
	// Properties is the raw property list (flags then values); it aliases
	// the payload passed to DecodeContentHeader.
	Properties []byte
}

// DecodeContentHeader decodes a content header frame's payload. It checks
// that the property list is well formed, the headers table's content and
// nesting included (CheckTable), but does not decode it: a header it
// accepts has properties DecodeProperties decodes. Errors wrap
// ErrMalformed, and ErrTooDeep for a headers table nested too deeply.
func DecodeContentHeader(payload []byte) (ContentHeader, error) {
	if len(payload) < contentHeaderSize+2 {
		return ContentHeader{}, fmt.Errorf("%w: content header of %d bytes", ErrMalformed, len(payload))
	}
	h := ContentHeader{
		ClassID:    binary.BigEndian.Uint16(payload),
		Weight:     binary.BigEndian.Uint16(payload[2:]),
		BodySize:   binary.BigEndian.Uint64(payload[4:]),
		Properties: payload[contentHeaderSize:],
	}
	if _, err := propertyOffset(h.Properties, 0); err != nil {
		return ContentHeader{}, fmt.Errorf("content header: %w", err)
	}
	if off, _ := propertyOffset(h.Properties, FlagHeaders); off >= 0 {
		if _, err := checkTable(h.Properties[off:], 0); err != nil {
			return ContentHeader{}, fmt.Errorf("content header: headers property: %w", err)
		}
	}
	return h, nil
}

// Properties are the basic class's content properties. Flags records
// which properties are present; see Append for how it combines with the
// field values.
type Properties struct {
	ContentType     string
	ContentEncoding string
	Headers         Table
	DeliveryMode    uint8
	Priority        uint8
	CorrelationId   string
	ReplyTo         string
	Expiration      string
	MessageId       string
	Timestamp       uint64
	Type            string
	UserId          string
	AppId           string
	ClusterId       string
	Flags           uint16
}

// flagsStart reads the flag words at the start of raw and returns the
// first word (unknown bits cleared) and the offset of the first value.
// Continuation words are accepted only if they announce no property.
func flagsStart(raw []byte) (uint16, int, error) {
	if len(raw) < 2 {
		return 0, 0, fmt.Errorf("%w: truncated property flags", ErrMalformed)
	}
	first := binary.BigEndian.Uint16(raw)
	off, w := 2, first
	for w&flagContinuation != 0 {
		if len(raw)-off < 2 {
			return 0, 0, fmt.Errorf("%w: truncated property flags", ErrMalformed)
		}
		w = binary.BigEndian.Uint16(raw[off:])
		off += 2
		if w&^flagContinuation != 0 {
			return 0, 0, fmt.Errorf("%w: unknown properties in continuation flags %#04x", ErrMalformed, w)
		}
	}
	return first & flagsKnown, off, nil
}

// propertyOffset returns the offset of the value of property flag in raw,
// skipping the values of the present properties before it. With flag 0 it
// walks the whole list and returns its end. It returns -1 if flag is
// absent.
func propertyOffset(raw []byte, flag uint16) (int, error) {
	flags, off, err := flagsStart(raw)
	if err != nil {
		return 0, err
	}
	if flag != 0 && flags&flag == 0 {
		return -1, nil
	}
	for f := FlagContentType; f >= FlagClusterId && f != flag; f >>= 1 {
		if flags&f == 0 {
			continue
		}
		var n uint64
		switch f {
		case FlagHeaders:
			if len(raw)-off < 4 {
				return 0, fmt.Errorf("%w: truncated headers table", ErrMalformed)
			}
			n = 4 + uint64(binary.BigEndian.Uint32(raw[off:]))
		case FlagDeliveryMode, FlagPriority:
			n = 1
		case FlagTimestamp:
			n = 8
		default:
			if len(raw)-off < 1 {
				return 0, fmt.Errorf("%w: truncated property", ErrMalformed)
			}
			n = 1 + uint64(raw[off])
		}
		if n > uint64(len(raw)-off) {
			return 0, fmt.Errorf("%w: truncated property %#04x", ErrMalformed, f)
		}
		off += int(n)
	}
	return off, nil
}

// PropertiesDeliveryMode returns the delivery-mode property of a raw
// property list (2 = persistent), or 0 if absent.
func PropertiesDeliveryMode(raw []byte) (uint8, error) {
	v, _, err := octetProperty(raw, FlagDeliveryMode)
	return v, err
}

// PropertiesPriority returns the priority property of a raw property list
// and whether it is present.
func PropertiesPriority(raw []byte) (uint8, bool, error) {
	return octetProperty(raw, FlagPriority)
}

func octetProperty(raw []byte, flag uint16) (uint8, bool, error) {
	off, err := propertyOffset(raw, flag)
	if err != nil || off < 0 {
		return 0, false, err
	}
	if off >= len(raw) {
		return 0, false, fmt.Errorf("%w: truncated property %#04x", ErrMalformed, flag)
	}
	return raw[off], true, nil
}

// PropertiesExpiration returns the expiration property (per-message TTL
// in milliseconds, as a decimal string) of a raw property list and whether
// it is present.
func PropertiesExpiration(raw []byte) (string, bool, error) {
	return shortstrProperty(raw, FlagExpiration)
}

// PropertiesUserID returns the user-id property of a raw property list and
// whether it is present. Absent, it costs a look at the flags.
func PropertiesUserID(raw []byte) (string, bool, error) {
	return shortstrProperty(raw, FlagUserId)
}

func shortstrProperty(raw []byte, flag uint16) (string, bool, error) {
	off, err := propertyOffset(raw, flag)
	if err != nil || off < 0 {
		return "", false, err
	}
	d := decoder{b: raw, off: off}
	s := d.shortstr()
	if d.err != nil {
		return "", false, d.err
	}
	return s, true, nil
}

// PropertiesReplyTo returns the reply-to property of a raw property list,
// aliasing raw, and whether it is present. Absent, it costs a look at the
// flags.
func PropertiesReplyTo(raw []byte) ([]byte, bool, error) {
	off, err := replyToOffset(raw)
	if err != nil || off < 0 {
		return nil, false, err
	}
	return raw[off+1 : off+1+int(raw[off])], true, nil
}

// replyToOffset returns the offset of the reply-to property's length
// octet, its value checked to lie within raw, or -1 if it is absent.
func replyToOffset(raw []byte) (int, error) {
	off, err := propertyOffset(raw, FlagReplyTo)
	if err != nil || off < 0 {
		return off, err
	}
	if off >= len(raw) || 1+int(raw[off]) > len(raw)-off {
		return 0, fmt.Errorf("%w: truncated property %#04x", ErrMalformed, FlagReplyTo)
	}
	return off, nil
}

// ReplaceReplyTo returns a copy of the raw property list raw, which has a
// reply-to property, with that property's value replaced by v (at most
// 255 bytes); the other properties are copied unchanged.
func ReplaceReplyTo(raw []byte, v string) ([]byte, error) {
	if len(v) > 255 {
		return nil, fmt.Errorf("reply-to of %d bytes is longer than a short string", len(v))
	}
	off, err := replyToOffset(raw)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("%w: no reply-to property to replace", ErrMalformed)
	}
	end := off + 1 + int(raw[off])
	b := make([]byte, 0, len(raw)-(end-off)+1+len(v))
	b = append(b, raw[:off]...)
	b = append(b, byte(len(v)))
	b = append(b, v...)
	return append(b, raw[end:]...), nil
}

// PropertiesHeaders decodes only the headers table of a raw property list
// (for headers-exchange routing) and reports whether it is present.
func PropertiesHeaders(raw []byte) (Table, bool, error) {
	off, err := propertyOffset(raw, FlagHeaders)
	if err != nil || off < 0 {
		return nil, false, err
	}
	t, _, err := DecodeTable(raw[off:])
	if err != nil {
		return nil, false, fmt.Errorf("headers property: %w", err)
	}
	return t, true, nil
}

// DecodeProperties decodes a raw property list (flags then values), as
// found in ContentHeader.Properties. Strings and tables are copied.
func DecodeProperties(raw []byte) (Properties, error) {
	var p Properties
	flags, off, err := flagsStart(raw)
	if err != nil {
		return p, err
	}
	p.Flags = flags
	d := decoder{b: raw, off: off}
	has := func(f uint16) bool { return flags&f != 0 }
	if has(FlagContentType) {
		p.ContentType = d.shortstr()
	}
	if has(FlagContentEncoding) {
		p.ContentEncoding = d.shortstr()
	}
	if has(FlagHeaders) {
		p.Headers = d.table()
	}
	if has(FlagDeliveryMode) {
		p.DeliveryMode = d.octet()
	}
	if has(FlagPriority) {
		p.Priority = d.octet()
	}
	if has(FlagCorrelationId) {
		p.CorrelationId = d.shortstr()
	}
	if has(FlagReplyTo) {
		p.ReplyTo = d.shortstr()
	}
	if has(FlagExpiration) {
		p.Expiration = d.shortstr()
	}
	if has(FlagMessageId) {
		p.MessageId = d.shortstr()
	}
	if has(FlagTimestamp) {
		p.Timestamp = d.longlong()
	}
	if has(FlagType) {
		p.Type = d.shortstr()
	}
	if has(FlagUserId) {
		p.UserId = d.shortstr()
	}
	if has(FlagAppId) {
		p.AppId = d.shortstr()
	}
	if has(FlagClusterId) {
		p.ClusterId = d.shortstr()
	}
	if d.err != nil {
		return Properties{}, fmt.Errorf("decode properties: %w", d.err)
	}
	return p, nil
}

// Present returns the flags Append will write: p.Flags plus a flag for
// every property with a non-zero value.
func (p *Properties) Present() uint16 {
	f := p.Flags & flagsKnown
	set := func(ok bool, flag uint16) {
		if ok {
			f |= flag
		}
	}
	set(p.ContentType != "", FlagContentType)
	set(p.ContentEncoding != "", FlagContentEncoding)
	set(len(p.Headers) > 0, FlagHeaders)
	set(p.DeliveryMode != 0, FlagDeliveryMode)
	set(p.Priority != 0, FlagPriority)
	set(p.CorrelationId != "", FlagCorrelationId)
	set(p.ReplyTo != "", FlagReplyTo)
	set(p.Expiration != "", FlagExpiration)
	set(p.MessageId != "", FlagMessageId)
	set(p.Timestamp != 0, FlagTimestamp)
	set(p.Type != "", FlagType)
	set(p.UserId != "", FlagUserId)
	set(p.AppId != "", FlagAppId)
	set(p.ClusterId != "", FlagClusterId)
	return f
}

// Append appends the raw property list (flags then values) to b. A
// property is written if its flag is set in p.Flags or its value is
// non-zero, so both decoded Properties (which keep present zero values)
// and literals like Properties{DeliveryMode: 2} encode as expected.
func (p *Properties) Append(b []byte) []byte {
	flags := p.Present()
	b = appendShort(b, flags)
	has := func(f uint16) bool { return flags&f != 0 }
	if has(FlagContentType) {
		b = appendShortstr(b, p.ContentType)
	}
	if has(FlagContentEncoding) {
		b = appendShortstr(b, p.ContentEncoding)
	}
	if has(FlagHeaders) {
		b = AppendTable(b, p.Headers)
	}
	if has(FlagDeliveryMode) {
		b = append(b, p.DeliveryMode)
	}
	if has(FlagPriority) {
		b = append(b, p.Priority)
	}
	if has(FlagCorrelationId) {
		b = appendShortstr(b, p.CorrelationId)
	}
	if has(FlagReplyTo) {
		b = appendShortstr(b, p.ReplyTo)
	}
	if has(FlagExpiration) {
		b = appendShortstr(b, p.Expiration)
	}
	if has(FlagMessageId) {
		b = appendShortstr(b, p.MessageId)
	}
	if has(FlagTimestamp) {
		b = appendLonglong(b, p.Timestamp)
	}
	if has(FlagType) {
		b = appendShortstr(b, p.Type)
	}
	if has(FlagUserId) {
		b = appendShortstr(b, p.UserId)
	}
	if has(FlagAppId) {
		b = appendShortstr(b, p.AppId)
	}
	if has(FlagClusterId) {
		b = appendShortstr(b, p.ClusterId)
	}
	return b
}
