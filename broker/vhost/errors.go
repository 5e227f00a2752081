package vhost

import (
	"errors"
	"fmt"

	"github.com/warrenmq/warren/broker/meta"
)

// Sentinel errors; protocols map them to their reply codes.
var (
	ErrNotFound       = errors.New("NOT_FOUND")
	ErrPrecondition   = errors.New("PRECONDITION_FAILED")
	ErrResourceLocked = errors.New("RESOURCE_LOCKED")
	ErrAccessRefused  = errors.New("ACCESS_REFUSED")
	ErrNotAllowed     = errors.New("NOT_ALLOWED")
	ErrClosed         = errors.New("vhost closed")
	// ErrRemote: the queue is held by another node and this node does
	// not forward to it (AMQP: 540 NOT_IMPLEMENTED, naming the node).
	ErrRemote = errors.New("NOT_IMPLEMENTED")
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

// fromMeta maps a metadata refusal to the vhost's errors, keeping
// RabbitMQ's text: an inequivalent declare is PRECONDITION_FAILED, a queue
// exclusive to another connection RESOURCE_LOCKED, a missing vhost
// NOT_FOUND. Anything else (I/O, a closed store) is wrapped with what was
// being done.
func fromMeta(err error, what string, args ...any) error {
	if err == nil {
		return nil
	}
	var me *meta.Error
	if errors.As(err, &me) {
		switch {
		case errors.Is(me.Kind, meta.ErrLocked):
			return errorf(ErrResourceLocked, "%s", me.Text)
		case errors.Is(me.Kind, meta.ErrInequivalent):
			return errorf(ErrPrecondition, "%s", me.Text)
		}
	}
	if errors.Is(err, meta.ErrNotFound) {
		return errorf(ErrNotFound, "%s", err)
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(what, args...), err)
}
