package message

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed is returned when decoding bytes that are not an encoded Message.
var ErrMalformed = errors.New("message: malformed encoding")

// Message is one published message. Fields are read-only after publish.
type Message struct {
	// ID is unique per node; every queue the message reaches stores it under
	// this id, so the per-vhost message store writes it once.
	ID         uint64
	Exchange   string
	RoutingKey string
	// Props are the raw AMQP basic properties (property flags and values).
	Props []byte
	Body  []byte
	// Persistent is delivery-mode 2.
	Persistent bool
	// Priority is the basic.priority property (0 when absent).
	Priority uint8
	// Expiry is the absolute per-message expiry in Unix nanoseconds, from the
	// expiration property at publish time; 0 means none.
	Expiry int64
	// Timestamp is when the broker accepted the message (Unix nanoseconds).
	Timestamp int64
}

// Size is the message's accounted size in bytes (body only, as RabbitMQ's
// message_bytes).
func (m *Message) Size() int { return len(m.Body) }

const encVersion = 1

// Encode appends the message's storage encoding to b:
// version(1) flags(1) priority(1) expiry(8) timestamp(8) id(8)
// len+exchange(1+n) len+key(1+n) len+props(4+n) body(rest).
func (m *Message) Encode(b []byte) []byte {
	var flags byte
	if m.Persistent {
		flags |= 1
	}
	b = append(b, encVersion, flags, m.Priority)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Expiry))
	b = binary.BigEndian.AppendUint64(b, uint64(m.Timestamp))
	b = binary.BigEndian.AppendUint64(b, m.ID)
	b = append(b, byte(len(m.Exchange)))
	b = append(b, m.Exchange...)
	b = append(b, byte(len(m.RoutingKey)))
	b = append(b, m.RoutingKey...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Props)))
	b = append(b, m.Props...)
	return append(b, m.Body...)
}

// EncodedSize is len(m.Encode(nil)).
func (m *Message) EncodedSize() int {
	return 3 + 24 + 1 + len(m.Exchange) + 1 + len(m.RoutingKey) + 4 + len(m.Props) + len(m.Body)
}

// Decode parses an encoding made by Encode. The returned message aliases b.
func Decode(b []byte) (*Message, error) {
	m := &Message{}
	if err := DecodeInto(m, b, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeInto is Decode into m (which aliases b). An exchange or routing
// key equal to like's (a message decoded before it, nil for none) shares
// like's string instead of allocating one: a batch of messages to one
// exchange and key decodes without an allocation per message.
func DecodeInto(m *Message, b []byte, like *Message) error {
	if len(b) < 27 || b[0] != encVersion {
		return fmt.Errorf("%w: header", ErrMalformed)
	}
	*m = Message{
		Persistent: b[1]&1 != 0,
		Priority:   b[2],
		Expiry:     int64(binary.BigEndian.Uint64(b[3:])),
		Timestamp:  int64(binary.BigEndian.Uint64(b[11:])),
		ID:         binary.BigEndian.Uint64(b[19:]),
	}
	var exchange, key string
	if like != nil {
		exchange, key = like.Exchange, like.RoutingKey
	}
	rest := b[27:]
	var err error
	if m.Exchange, rest, err = shortStringLike(rest, exchange); err != nil {
		return fmt.Errorf("%w: exchange", err)
	}
	if m.RoutingKey, rest, err = shortStringLike(rest, key); err != nil {
		return fmt.Errorf("%w: routing key", err)
	}
	if len(rest) < 4 {
		return fmt.Errorf("%w: props length", ErrMalformed)
	}
	n := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(n) > uint64(len(rest)) {
		return fmt.Errorf("%w: props", ErrMalformed)
	}
	m.Props = rest[:n:n]
	m.Body = rest[n:]
	return nil
}

// shortStringLike is shortString, returning like itself when equal.
func shortStringLike(b []byte, like string) (string, []byte, error) {
	if len(b) < 1 || int(b[0]) > len(b)-1 {
		return "", nil, ErrMalformed
	}
	n := int(b[0])
	if string(b[1:1+n]) == like { // compared without allocating
		return like, b[1+n:], nil
	}
	return string(b[1 : 1+n]), b[1+n:], nil
}
