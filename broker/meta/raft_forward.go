package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/cluster/raftgroup"
)

// applyAnswer is the leader's answer to a forwarded write: the entry's
// index and whether it changed anything, or, from a node that is not the
// leader, Index 0 and the leader it knows ("" for none).
type applyAnswer struct {
	Index   uint64 `json:"index,omitempty"`
	Changed bool   `json:"changed,omitempty"`
	Leader  string `json:"leader,omitempty"`
}

// maxAnswer bounds an answer read from a peer.
const maxAnswer = 4096

func decodeAnswer(b []byte) (applyAnswer, error) {
	var a applyAnswer
	if len(b) > maxAnswer {
		return a, fmt.Errorf("meta: answer of %d bytes from the leader", len(b))
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("meta: undecodable answer from the leader: %w", err)
	}
	return a, nil
}

// forward sends a write to the leader. A refusal comes back as the error
// the leader's state machine gave (see fromStatus).
func (r *Raft) forward(ctx context.Context, leader string, data []byte) (applyAnswer, error) {
	b, err := r.net.Call(ctx, leader, applyMethod, data)
	if err != nil {
		return applyAnswer{}, fromStatus(err)
	}
	return decodeAnswer(b)
}

// handleApply is the leader's side of a forwarded write: the command is
// applied as if written here, and answered with its index once this node
// applied it. A node that is not the leader answers with the leader's name.
func (r *Raft) handleApply(ctx context.Context, from string, req []byte) ([]byte, error) {
	if r.isClosed() {
		return nil, status.Error(codes.Unavailable, "meta: store closed")
	}
	if _, err := decodeEntry(req); err != nil {
		return nil, toStatus(err)
	}
	redirect := func() ([]byte, error) {
		return json.Marshal(applyAnswer{Leader: r.group.Leader()})
	}
	if !r.group.IsLeader() {
		return redirect()
	}
	res, index, err := r.group.Apply(ctx, req)
	switch {
	case errors.Is(err, raftgroup.ErrNotLeader):
		return redirect()
	case err != nil:
		return nil, toStatus(err)
	}
	ar := res.(applyResult)
	if ar.err != nil {
		return nil, toStatus(ar.err)
	}
	return json.Marshal(applyAnswer{Index: index, Changed: ar.changed})
}

// errorCodes maps the errors a write can be refused with to the gRPC codes
// they cross nodes with; the first match wins. A code comes back as the
// sentinel of its first row with back set (the others are retried or
// reported by their code alone); a typed row's status carries an *Error's
// Text, rebuilt as an *Error of that Kind.
var errorCodes = []struct {
	err   error
	code  codes.Code
	back  bool
	typed bool
}{
	{ErrInequivalent, codes.FailedPrecondition, true, true},
	{ErrLocked, codes.Aborted, true, true},
	{ErrNotFound, codes.NotFound, true, false},
	{ErrInvalid, codes.InvalidArgument, true, false},
	{context.Canceled, codes.Canceled, true, false},
	{context.DeadlineExceeded, codes.DeadlineExceeded, true, false},
	{ErrClosed, codes.Unavailable, false, false},
	{raftgroup.ErrClosed, codes.Unavailable, false, false},
	{raftgroup.ErrNotLeader, codes.Unavailable, false, false},
	{raftgroup.ErrLeadershipLost, codes.Unavailable, false, false},
}

// toStatus turns an error into the status a caller on another node gets;
// its message is err's text (an *Error's Text).
func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, m := range errorCodes {
		if !errors.Is(err, m.err) {
			continue
		}
		msg := err.Error()
		var e *Error
		if m.typed && errors.As(err, &e) {
			msg = e.Text
		}
		return status.Error(m.code, msg)
	}
	return status.Error(codes.Unknown, err.Error())
}

// fromStatus turns a status from another node back into the error it was
// there: errors.Is matches the sentinel of its code, the text is the same,
// and a typed refusal is an *Error again.
func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, m := range errorCodes {
		if !m.back || m.code != st.Code() {
			continue
		}
		if m.typed {
			return &Error{Kind: m.err, Text: st.Message()}
		}
		return &remoteError{msg: st.Message(), kind: m.err, status: err}
	}
	return &remoteError{msg: st.Message(), status: err}
}

// remoteError is an error another node gave: its text, and the sentinel it
// matched there.
type remoteError struct {
	msg    string
	kind   error // nil: none known
	status error
}

func (e *remoteError) Error() string { return e.msg }

// Unwrap lets errors.Is match the sentinel and status.FromError the status.
func (e *remoteError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.status}
	}
	return []error{e.kind, e.status}
}

// GRPCStatus lets status.Code read the code.
func (e *remoteError) GRPCStatus() *status.Status {
	st, _ := status.FromError(e.status)
	return st
}

func isUnavailable(err error) bool {
	return status.Code(err) == codes.Unavailable
}

// Sync returns once this node has applied every command the leader had
// committed when Sync was called (a read barrier): reads then see every
// write that returned anywhere before. The server calls it at start,
// before it serves clients.
func (r *Raft) Sync(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		if r.isClosed() {
			return ErrClosed
		}
		index, retry, err := r.syncOnce(ctx)
		if err == nil {
			return r.fsm.waitApplied(ctx, index)
		}
		if errors.Is(err, raftgroup.ErrClosed) {
			return fmt.Errorf("%w (%v)", ErrClosed, err)
		}
		if !retry {
			return err
		}
		if werr := backoff(ctx, attempt); werr != nil {
			return fmt.Errorf("meta: sync (last try: %v): %w", err, werr)
		}
	}
}

// syncOnce asks the leader (maybe this node) for the index to wait for.
func (r *Raft) syncOnce(ctx context.Context) (index uint64, retry bool, err error) {
	if r.group.IsLeader() {
		index, err := r.leaderIndex(ctx)
		return index, retryable(err), err
	}
	leader := r.group.Leader()
	if leader == "" {
		if leader, err = r.group.WaitLeader(ctx); err != nil {
			return 0, false, err
		}
	}
	if leader == r.net.Node() {
		return 0, true, raftgroup.ErrNotLeader
	}
	b, err := r.net.Call(ctx, leader, syncMethod, nil)
	if err != nil {
		err = fromStatus(err)
		return 0, isUnavailable(err), err
	}
	ans, err := decodeAnswer(b)
	if err != nil {
		return 0, false, err
	}
	if ans.Index == 0 {
		return 0, true, fmt.Errorf("%w: %s redirects to %q", raftgroup.ErrNotLeader, leader, ans.Leader)
	}
	return ans.Index, false, nil
}

// leaderIndex is, on the leader, an index covering everything committed so
// far: a barrier commits and applies all earlier entries (those of past
// terms too), then the fsm's applied index is at least the commit index.
func (r *Raft) leaderIndex(ctx context.Context) (uint64, error) {
	if err := r.group.Barrier(ctx); err != nil {
		return 0, err
	}
	r.fsm.idxMu.Lock()
	defer r.fsm.idxMu.Unlock()
	return max(r.fsm.applied, 1), nil
}

// handleSync answers a follower's Sync: the leader's index to wait for, or
// the leader's name from another node.
func (r *Raft) handleSync(ctx context.Context, from string, _ []byte) ([]byte, error) {
	if r.isClosed() {
		return nil, status.Error(codes.Unavailable, "meta: store closed")
	}
	if !r.group.IsLeader() {
		return json.Marshal(applyAnswer{Leader: r.group.Leader()})
	}
	index, err := r.leaderIndex(ctx)
	if errors.Is(err, raftgroup.ErrNotLeader) {
		return json.Marshal(applyAnswer{Leader: r.group.Leader()})
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return json.Marshal(applyAnswer{Index: index})
}
