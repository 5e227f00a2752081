package vhost

import (
	"errors"
	"fmt"
)

// Sentinel errors; protocols map them to their reply codes.
var (
	ErrNotFound       = errors.New("NOT_FOUND")
	ErrPrecondition   = errors.New("PRECONDITION_FAILED")
	ErrResourceLocked = errors.New("RESOURCE_LOCKED")
	ErrAccessRefused  = errors.New("ACCESS_REFUSED")
	ErrNotAllowed     = errors.New("NOT_ALLOWED")
	ErrClosed         = errors.New("vhost closed")
)

// Error is a protocol-visible failure: a sentinel kind and RabbitMQ's text.
type Error struct {
	Kind error
	Text string
}

func (e *Error) Error() string { return e.Kind.Error() + " - " + e.Text }

// Unwrap lets errors.Is match the sentinel kind.
func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Text: fmt.Sprintf(format, args...)}
}

// ErrCommandInvalid is a request no vhost state could satisfy (e.g. an
// unknown exchange type); AMQP closes the connection for it.
var ErrCommandInvalid = errors.New("COMMAND_INVALID")
