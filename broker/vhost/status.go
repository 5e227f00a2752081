package vhost

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/queue"
)

// Errors crossing a node boundary (forwarded queue operations) are gRPC
// status errors: the kind is the code, RabbitMQ's text the message.
// ToStatus makes one on the owner, FromStatus turns it back into an
// *Error on the caller.

var kindCodes = []struct {
	kind error
	code codes.Code
}{
	{ErrNotFound, codes.NotFound},
	{ErrPrecondition, codes.FailedPrecondition},
	{ErrResourceLocked, codes.Aborted},
	{ErrAccessRefused, codes.PermissionDenied},
	{ErrNotAllowed, codes.Unauthenticated},
	{ErrRemote, codes.Unimplemented},
	{ErrCommandInvalid, codes.InvalidArgument},
}

// ToStatus maps a vhost or queue error to a gRPC status error.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ve *Error
	if errors.As(err, &ve) {
		for _, kc := range kindCodes {
			if errors.Is(ve.Kind, kc.kind) {
				return status.Error(kc.code, ve.Text)
			}
		}
	}
	code := codes.Internal
	switch {
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrDeleted), errors.Is(err, ErrClosed):
		code = codes.NotFound
	case errors.Is(err, queue.ErrInUse), errors.Is(err, queue.ErrNotEmpty), errors.Is(err, queue.ErrInvalidArgument), errors.Is(err, queue.ErrUnsupported):
		code = codes.FailedPrecondition
	case errors.Is(err, queue.ErrExclusiveConsumer), errors.Is(err, queue.ErrConsumersExist):
		code = codes.PermissionDenied
	case errors.Is(err, queue.ErrNotImplemented):
		code = codes.Unimplemented
	case errors.Is(err, queue.ErrStopped):
		code = codes.Unavailable
	}
	return status.Error(code, err.Error())
}

// FromStatus maps a status error from another node back to an *Error
// with the status's message as its text; a code without a kind (an
// unreachable node, an internal failure) is returned as is.
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	for _, kc := range kindCodes {
		if st.Code() == kc.code {
			return &Error{Kind: kc.kind, Text: st.Message()}
		}
	}
	return err
}
