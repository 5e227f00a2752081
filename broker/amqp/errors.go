package amqp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/vhost"
)

// Error is a protocol error with its reply code. Hard errors close the
// connection, soft ones the channel.
type Error struct {
	Code     uint16
	Text     string
	ClassID  uint16
	MethodID uint16
	Hard     bool
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Text) }

var codeNames = map[uint16]string{
	wire.ContentTooLarge:    "CONTENT_TOO_LARGE",
	wire.NoRoute:            "NO_ROUTE",
	wire.NoConsumers:        "NO_CONSUMERS",
	wire.ConnectionForced:   "CONNECTION_FORCED",
	wire.InvalidPath:        "INVALID_PATH",
	wire.AccessRefused:      "ACCESS_REFUSED",
	wire.NotFound:           "NOT_FOUND",
	wire.ResourceLocked:     "RESOURCE_LOCKED",
	wire.PreconditionFailed: "PRECONDITION_FAILED",
	wire.FrameError:         "FRAME_ERROR",
	wire.SyntaxError:        "SYNTAX_ERROR",
	wire.CommandInvalid:     "COMMAND_INVALID",
	wire.ChannelError:       "CHANNEL_ERROR",
	wire.UnexpectedFrame:    "UNEXPECTED_FRAME",
	wire.ResourceError:      "RESOURCE_ERROR",
	wire.NotAllowed:         "NOT_ALLOWED",
	wire.NotImplemented:     "NOT_IMPLEMENTED",
	wire.InternalError:      "INTERNAL_ERROR",
}

func hardCode(code uint16) bool {
	switch code {
	case wire.ContentTooLarge, wire.NoRoute, wire.NoConsumers, wire.AccessRefused, wire.NotFound, wire.ResourceLocked, wire.PreconditionFailed:
		return false
	}
	return true
}

// newError builds an error with RabbitMQ's "CODE_NAME - text" wording.
func newError(code uint16, format string, args ...any) *Error {
	return &Error{Code: code, Text: codeNames[code] + " - " + fmt.Sprintf(format, args...), Hard: hardCode(code)}
}

// fromErr maps vhost and queue errors onto reply codes.
func fromErr(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	var ve *vhost.Error
	if errors.As(err, &ve) {
		code := map[error]uint16{
			vhost.ErrNotFound:       wire.NotFound,
			vhost.ErrPrecondition:   wire.PreconditionFailed,
			vhost.ErrResourceLocked: wire.ResourceLocked,
			vhost.ErrAccessRefused:  wire.AccessRefused,
			vhost.ErrNotAllowed:     wire.NotAllowed,
			vhost.ErrCommandInvalid: wire.CommandInvalid,
			vhost.ErrRemote:         wire.NotImplemented,
		}[ve.Kind]
		if code == 0 {
			code = wire.InternalError
		}
		return newError(code, "%s", ve.Text)
	}
	switch {
	case errors.Is(err, queue.ErrExclusiveConsumer), errors.Is(err, queue.ErrConsumersExist):
		return newError(wire.AccessRefused, "%s", err)
	case errors.Is(err, queue.ErrInvalidArgument), errors.Is(err, queue.ErrInUse), errors.Is(err, queue.ErrNotEmpty), errors.Is(err, queue.ErrUnsupported):
		return newError(wire.PreconditionFailed, "%s", err)
	case errors.Is(err, queue.ErrNotImplemented):
		return newError(wire.NotImplemented, "%s", strings.TrimPrefix(err.Error(), queue.ErrNotImplemented.Error()+": "))
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrDeleted):
		return newError(wire.NotFound, "%s", err)
	}
	return newError(wire.InternalError, "%s", err)
}
