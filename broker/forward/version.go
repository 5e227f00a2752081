package forward

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/cluster/transport"
)

// Every forwarded request but forward.cancelled starts with the version
// of its layout. A node checks it before decoding (versioned, checkVersion)
// and answers a request of another version FailedPrecondition, naming
// both: nodes of different releases must fail loudly, never apply part
// of a request. Whoever changes a request's layout bumps its version here.
// (There is no compatibility with other versions before the first
// release.)

// settleVersion is forward.settle's: several (op, seqs) runs (version 1
// carried one).
const settleVersion = 2

// consumeVersion is forward.consume's: its queue reference as every
// one-queue request's. Version 2: the owner holds an automatic-ack
// consumer to autoAckWindowBytes as well as autoAckWindow, and the
// consumer's node gives credit after a quarter of those bytes too (a node
// of version 1 would give none by bytes, and its consumer would stall on
// an owner of version 2); the deliver and credit layouts are unchanged.
const consumeVersion = 2

// requestVersion is the layout version of method's requests.
func requestVersion(method string) byte {
	switch method {
	case methodPublish:
		return publishVersion
	case methodSettle:
		return settleVersion
	case methodConsume:
		return consumeVersion
	default:
		return wireVersion
	}
}

// checkVersion refuses a request of method whose layout version is not
// this node's.
func checkVersion(method string, req []byte) error {
	want := requestVersion(method)
	if len(req) == 0 {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("%s: empty request", method))
	}
	if req[0] != want {
		return status.Error(codes.FailedPrecondition, fmt.Sprintf("%s version %d not understood (this node speaks %d)", method, req[0], want))
	}
	return nil
}

// versioned is h behind method's version check.
func versioned(method string, h transport.Handler) transport.Handler {
	return func(ctx context.Context, from string, req []byte) ([]byte, error) {
		if err := checkVersion(method, req); err != nil {
			return nil, err
		}
		return h(ctx, from, req)
	}
}

// versionedStart is s behind method's version check.
func versionedStart(method string, s transport.Starter) transport.Starter {
	return func(ctx context.Context, from string, req []byte, answer func([]byte, error)) error {
		if err := checkVersion(method, req); err != nil {
			return err
		}
		return s(ctx, from, req, answer)
	}
}

// versionMismatch reports whether err is a peer's refusal of this node's
// request layout (checkVersion) or method (an older node): asking again
// cannot help.
func versionMismatch(err error) bool {
	c := status.Code(err)
	return c == codes.FailedPrecondition || c == codes.Unimplemented
}
