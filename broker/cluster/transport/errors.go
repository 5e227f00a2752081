package transport

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errUnreachable is the cause a call's context is cancelled with when its
// link is cut under it (a partition, a peer or this Network closing).
var errUnreachable = errors.New("peer unreachable")

// asStatus turns err into the status error that crosses a node boundary:
// status errors pass as they are, a context's end becomes Canceled or
// DeadlineExceeded, anything else Unknown with its text.
func asStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// ctxStatus is the status of a call whose context ctx ended: Unavailable if
// its link was cut, else Canceled or DeadlineExceeded.
func ctxStatus(ctx context.Context, node string) error {
	if errors.Is(context.Cause(ctx), errUnreachable) {
		return unavailable(node, errUnreachable)
	}
	return status.FromContextError(ctx.Err()).Err()
}

func unavailable(node string, why error) error {
	return status.Errorf(codes.Unavailable, "node %q: %v", node, why)
}
