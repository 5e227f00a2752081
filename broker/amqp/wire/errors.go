package wire

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of them, so
// callers test with errors.Is.
var (
	// ErrMalformed reports a method, table, content header or property
	// list that is truncated or otherwise violates the wire format.
	ErrMalformed = errors.New("amqp: malformed frame payload")
	// ErrUnknownMethod reports a method frame whose class id or method id
	// is not defined by the specification.
	ErrUnknownMethod = errors.New("amqp: unknown class or method")
	// ErrFrameTooLarge reports a frame whose size exceeds the negotiated
	// maximum (see Reader.SetMaxFrameSize).
	ErrFrameTooLarge = errors.New("amqp: frame too large")
	// ErrBadFrameEnd reports a frame not terminated by FrameEnd.
	ErrBadFrameEnd = errors.New("amqp: bad frame end octet")
	// ErrBadFrameType reports a frame whose type octet is not one of
	// FrameMethod, FrameHeader, FrameBody or FrameHeartbeat.
	ErrBadFrameType = errors.New("amqp: unknown frame type")
	// ErrTooDeep reports tables or arrays nested more than MaxNestingDepth
	// levels deep. It wraps ErrMalformed: such input is refused wherever
	// it arrives, so nothing stored is later undecodable.
	ErrTooDeep = fmt.Errorf("%w: tables or arrays nested more than %d levels deep", ErrMalformed, MaxNestingDepth)
)
