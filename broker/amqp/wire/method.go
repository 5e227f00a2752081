package wire

import (
	"encoding/binary"
	"fmt"
)

// Method is one AMQP method: the payload of a method frame. The generated
// types (ConnectionStart, BasicPublish, ...) implement it with pointer
// receivers; DecodeMethod returns pointers.
type Method interface {
	// ClassID is the method's class id (ClassBasic for basic.publish).
	ClassID() uint16
	// MethodID is the method's id within its class.
	MethodID() uint16
	// Name is the spec's dotted name, e.g. "basic.publish".
	Name() string
	// HasContent reports whether a content header and body frames follow:
	// true for basic.publish, basic.return, basic.deliver and basic.get-ok.
	HasContent() bool
	// Append appends the class id, method id and arguments to b.
	Append(b []byte) []byte
}

// DecodeMethod decodes the payload of a method frame. It returns one of the
// generated pointer types. Strings, tables and byte arrays are copied, so the
// result never aliases payload. An unknown class or method yields an error
// wrapping ErrUnknownMethod; truncated arguments one wrapping ErrMalformed.
// Bytes after the last argument are ignored.
func DecodeMethod(payload []byte) (Method, error) {
	if len(payload) < 4 {
		return nil, fmt.Errorf("%w: method frame payload of %d bytes", ErrMalformed, len(payload))
	}
	classID := binary.BigEndian.Uint16(payload)
	methodID := binary.BigEndian.Uint16(payload[2:])
	d := decoder{b: payload[4:]}
	m := decodeArguments(classID, methodID, &d)
	if m == nil {
		return nil, fmt.Errorf("%w: class %d method %d", ErrUnknownMethod, classID, methodID)
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode %s: %w", m.Name(), d.err)
	}
	return m, nil
}
