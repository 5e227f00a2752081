package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// streamKind names the three streams a node opens to each peer.
type streamKind int

const (
	control  streamKind = iota // heartbeats, votes, pre-votes, timeout-now
	data                       // appends (in order per group); calls of a peer without a lane
	snapshot                   // InstallSnapshot and its chunks
	calls                      // node-level calls: the call lane (lane.go), not a gRPC stream
	numKinds
)

func (k streamKind) String() string {
	return [...]string{"control", "data", "snapshot", "calls"}[k]
}

// maxInflight bounds the requests a peer has under way on one stream; more
// are answered ResourceExhausted.
const maxInflight = 1 << 16

// serverLink is this node's end of a stream a peer opened: it runs the
// peer's requests and sends their answers back. Appends of one group run
// one after the other, in the order they came (the pipeline's order); the
// starts of ordered calls (HandleOrdered) run on the reader, in the order
// they came; the rest run concurrently.
type serverLink struct {
	*link
	n    *GRPCNetwork
	kind streamKind
	from string
	// heard is from's entry in n.heard, looked up at each frame until
	// there is one (the peer may open its streams before SetAddress).
	heard *lastHeard

	mu       sync.Mutex
	inflight map[uint64]context.CancelFunc
	queues   map[string][]func() // per group: appends waiting for the one running
	snaps    map[uint64]*snapIn
}

// snapIn is a snapshot arriving in chunks: what is left of it and the pipe
// Raft reads it from.
type snapIn struct {
	w    *io.PipeWriter
	left int64
}

// errMalformed marks a message that closes its stream.
var errMalformed = errors.New("malformed message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// serve reads the peer's frames until the stream ends or a message is
// malformed (then the stream closes with InvalidArgument).
func (s *serverLink) serve() error {
	defer s.shut()
	for {
		f, err := s.s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		s.markHeard()
		s.n.stats.framesReceived.Add(1)
		s.n.stats.messagesReceived.Add(uint64(len(f.GetMessages())))
		for _, m := range f.GetMessages() {
			if err := s.dispatch(m); err != nil {
				s.n.log.Warn("cluster peer sent a malformed message; closing its stream",
					"peer", s.from, "stream", s.kind.String(), "error", err)
				return status.Error(codes.InvalidArgument, err.Error())
			}
		}
	}
}

// markHeard records that the peer was heard from (liveness.go).
func (s *serverLink) markHeard() {
	if s.heard == nil {
		if s.heard = s.n.heard.of(s.from, false); s.heard == nil {
			return
		}
	}
	s.n.heard.mark(s.heard)
}

// shut ends the requests under way and waits for the writer: gRPC's
// stream must not be written once its handler returned.
func (s *serverLink) shut() {
	s.cancel(errLinkClosed)
	s.mu.Lock()
	for id, in := range s.snaps {
		in.w.CloseWithError(errLinkClosed)
		delete(s.snaps, id)
	}
	s.mu.Unlock()
	<-s.done
}

func (s *serverLink) dispatch(m *pb.Message) error {
	switch b := m.GetBody().(type) {
	case *pb.Message_Cancel:
		s.mu.Lock()
		if cancel := s.inflight[m.GetId()]; cancel != nil {
			cancel()
		}
		if in := s.snaps[m.GetId()]; in != nil {
			in.w.CloseWithError(context.Canceled)
			delete(s.snaps, m.GetId())
		}
		s.mu.Unlock()
		return nil
	case *pb.Message_Call:
		if s.kind != data && s.kind != calls {
			return malformed("a call on the %s stream", s.kind)
		}
		method, payload := b.Call.GetMethod(), b.Call.GetPayload()
		switch h, _ := s.n.core.handler(method); {
		case h.inline != nil:
			// Run here and answered at once: nothing waits for it, so
			// neither does the answer wait for room (the requests read
			// bound the answers).
			resp, err := h.inline(s.ctx, s.from, payload)
			var out *pb.Message
			if err == nil {
				out = &pb.Message{Body: &pb.Message_CallResp{CallResp: &pb.CallResponse{Payload: resp}}}
			}
			s.answerCtx(Immediate(s.ctx), m.GetId(), out, err)
			return nil
		case h.s != nil:
			// Started here, so in the order they came; answered where
			// the start has answer called (no goroutine waits for it).
			return s.run(m, func(ctx context.Context, finish func(*pb.Message, error)) (func() (*pb.Message, error), error) {
				return nil, h.start(ctx, s.from, payload, func(resp []byte, err error) { finish(callResp(resp, err)) })
			}, inline)
		}
		// A plain Handler (or none: its error), on a goroutine of its own.
		return s.run(m, now(func(ctx context.Context) (*pb.Message, error) {
			return callResp(s.n.core.serveCall(ctx, s.from, method, payload))
		}), "")
	case *pb.Message_SnapshotChunk:
		return s.chunk(m.GetId(), b.SnapshotChunk)
	case *pb.Message_Ping:
		s.answer(m.GetId(), &pb.Message{Body: &pb.Message_Ping{Ping: &pb.Ping{}}}, nil)
		return nil
	}
	cmd, ok, err := raftBody(m)
	switch {
	case !ok:
		return malformed("no request in message %d", m.GetId())
	case err != nil:
		return malformed("%v", err)
	}
	group := m.GetGroup()
	switch cmd := cmd.(type) {
	case *raft.AppendEntriesRequest:
		order := ""
		if s.kind == data {
			order = group
		}
		return s.run(m, s.raftStart(group, cmd, nil), order)
	case *raft.InstallSnapshotRequest:
		if s.kind != snapshot {
			return malformed("InstallSnapshot on the %s stream", s.kind)
		}
		return s.install(m, group, cmd)
	case *raft.RequestVoteRequest, *raft.RequestPreVoteRequest, *raft.TimeoutNowRequest:
		return s.run(m, s.raftStart(group, cmd, nil), "")
	default:
		return malformed("an answer (%T) where requests go", cmd)
	}
}

// inline is the order of a request started on the stream's reader
// goroutine (an ordered call): in the order it came, without handing it to
// another goroutine. No group id is this (group ids are names).
const inline = "\x00inline"

// starter begins a request and returns how to wait for its answer, or a
// nil wait when it has finish called with the answer instead (once, at
// once or later, from any goroutine).
type starter func(ctx context.Context, finish func(*pb.Message, error)) (wait func() (*pb.Message, error), err error)

// now is the starter of a request that runs to its answer at once.
func now(fn func(context.Context) (*pb.Message, error)) starter {
	return func(ctx context.Context, _ func(*pb.Message, error)) (func() (*pb.Message, error), error) {
		return func() (*pb.Message, error) { return fn(ctx) }, nil
	}
}

// callResp is a call's answer message.
func callResp(resp []byte, err error) (*pb.Message, error) {
	if err != nil {
		return nil, err
	}
	return &pb.Message{Body: &pb.Message_CallResp{CallResp: &pb.CallResponse{Payload: resp}}}, nil
}

// raftStart hands one Raft RPC to the group; its wait wraps the answer.
func (s *serverLink) raftStart(group string, cmd any, r io.Reader) starter {
	return func(ctx context.Context, _ func(*pb.Message, error)) (func() (*pb.Message, error), error) {
		wait, err := s.n.core.startRaft(ctx, group, cmd, r)
		if err != nil {
			return nil, err
		}
		return func() (*pb.Message, error) {
			resp, err := wait()
			if err != nil {
				return nil, err
			}
			out := &pb.Message{}
			if err := setRaftBody(out, resp); err != nil {
				return nil, status.Errorf(codes.Internal, "group %q: %v", group, err)
			}
			return out, nil
		}, nil
	}
}

// run runs request m and sends its answer. Without order it runs on a
// goroutine of its own; with order (a group id) it starts after the
// earlier requests of that order, and waits for its answer apart (so a
// follower gets a pipeline's appends in order, many at once); inline, it
// starts here and waits for its answer apart.
func (s *serverLink) run(m *pb.Message, start starter, order string) error {
	id := m.GetId()
	ctx, cancel := s.requestContext(m)
	s.mu.Lock()
	if _, dup := s.inflight[id]; dup {
		s.mu.Unlock()
		cancel()
		return malformed("request id %d reused while under way", id)
	}
	if len(s.inflight) >= maxInflight {
		s.mu.Unlock()
		cancel()
		s.answer(id, nil, status.Errorf(codes.ResourceExhausted, "more than %d requests under way on the %s stream", maxInflight, s.kind))
		return nil
	}
	s.inflight[id] = cancel
	end := func(resp *pb.Message, err error, answerCtx context.Context) {
		s.mu.Lock()
		delete(s.inflight, id)
		s.mu.Unlock()
		cancel()
		s.answerCtx(answerCtx, id, resp, err)
	}
	finish := func(resp *pb.Message, err error) { end(resp, err, s.ctx) }
	// A start that answers itself does so on whatever goroutine has the
	// answer (a queue's loop): it never waits for room in the link (the
	// requests read bound these answers, as an inline handler's).
	task := func() {
		wait, err := start(ctx, func(resp *pb.Message, err error) { end(resp, err, Immediate(s.ctx)) })
		switch {
		case err != nil:
			finish(nil, err)
		case wait == nil: // answered through finish
		case order == "":
			finish(wait())
		default:
			go func() { finish(wait()) }()
		}
	}
	switch order {
	case "":
		s.mu.Unlock()
		go task()
		return nil
	case inline:
		s.mu.Unlock()
		task()
		return nil
	}
	q, running := s.queues[order]
	s.queues[order] = append(q, task)
	s.mu.Unlock()
	if !running {
		go s.drain(order)
	}
	return nil
}

// drain runs group's queued appends in order until none is left.
func (s *serverLink) drain(group string) {
	for {
		s.mu.Lock()
		q := s.queues[group]
		if len(q) == 0 {
			delete(s.queues, group)
			s.mu.Unlock()
			return
		}
		task := q[0]
		q[0] = nil
		s.queues[group] = q[1:]
		s.mu.Unlock()
		task()
	}
}

// maxRequestTime caps how long any request of a peer may run here.
const maxRequestTime = time.Hour

// requestContext ends with the stream, the caller's cancel or its timeout
// (at most maxRequestTime). An InstallSnapshot without a timeout gets the
// one its sender would have had, so a snapshot nobody reads never holds its
// stream for long. It starts no timer until someone waits on it
// (requestCtx).
func (s *serverLink) requestContext(m *pb.Message) (context.Context, context.CancelFunc) {
	d := time.Duration(min(max(m.GetTimeoutUs(), 0), int64(maxRequestTime/time.Microsecond))) * time.Microsecond
	if d == 0 {
		if in, ok := m.GetBody().(*pb.Message_InstallSnapshot); ok {
			d = s.n.core.rpcTimeout + time.Duration(max(in.InstallSnapshot.GetSize(), 0)/snapshotRate)*time.Second
		}
	}
	var dl time.Time
	if d > 0 {
		dl = time.Now().Add(d)
	}
	return newRequestCtx(s.ctx, dl)
}

// answer sends the answer (or error status) of request id.
func (s *serverLink) answer(id uint64, resp *pb.Message, err error) {
	s.answerCtx(s.ctx, id, resp, err)
}

// answerCtx is answer whose wait for room in the queue ctx bounds.
func (s *serverLink) answerCtx(ctx context.Context, id uint64, resp *pb.Message, err error) {
	if err == nil {
		if size := resp.SizeVT(); size > s.n.maxMsg {
			err = status.Errorf(codes.ResourceExhausted, "answer of %d bytes (limit %d)", size, s.n.maxMsg)
		}
	}
	if err != nil {
		st := status.Convert(asStatus(err))
		resp = &pb.Message{Body: &pb.Message_Error{Error: &pb.Status{Code: int32(st.Code()), Message: st.Message()}}}
	}
	resp.Id = id
	if perr := s.put(ctx, resp); perr != nil && s.ctx.Err() == nil {
		s.n.log.Warn("cluster: answer not sent", "peer", s.from, "error", perr)
	}
}

// install starts an InstallSnapshot: Raft reads its data from a pipe the
// chunks that follow are written to.
func (s *serverLink) install(m *pb.Message, group string, req *raft.InstallSnapshotRequest) error {
	if req.Size > s.n.maxSnapshot {
		return malformed("snapshot of %d bytes (limit %d)", req.Size, s.n.maxSnapshot)
	}
	r, w := io.Pipe()
	s.mu.Lock()
	if _, dup := s.snaps[m.GetId()]; dup {
		s.mu.Unlock()
		return malformed("snapshot id %d reused", m.GetId())
	}
	id := m.GetId()
	s.snaps[id] = &snapIn{w: w, left: req.Size}
	s.mu.Unlock()
	start := s.raftStart(group, req, r)
	return s.run(m, now(func(ctx context.Context) (*pb.Message, error) {
		resp, err := func() (*pb.Message, error) {
			wait, err := start(ctx, nil) // a raft start never answers through finish
			if err != nil {
				return nil, err
			}
			return wait()
		}()
		r.CloseWithError(errSnapshotDone)
		s.mu.Lock()
		delete(s.snaps, id) // later chunks are dropped
		s.mu.Unlock()
		return resp, err
	}), "")
}

var errSnapshotDone = errors.New("snapshot answered")

// chunk writes one chunk of snapshot id to the pipe Raft reads.
func (s *serverLink) chunk(id uint64, c *pb.SnapshotChunk) error {
	s.mu.Lock()
	in := s.snaps[id]
	if in == nil {
		s.mu.Unlock()
		return nil // cancelled: the caller sent before it knew
	}
	if int64(len(c.GetData())) > in.left || c.GetLast() && int64(len(c.GetData())) != in.left {
		s.mu.Unlock()
		return malformed("snapshot %d: chunk of %d bytes with %d left (last %v)", id, len(c.GetData()), in.left, c.GetLast())
	}
	in.left -= int64(len(c.GetData()))
	if c.GetLast() {
		delete(s.snaps, id)
	}
	s.mu.Unlock()
	if len(c.GetData()) > 0 {
		_, _ = in.w.Write(c.GetData()) // fails once Raft stopped reading: the answer says why
	}
	if c.GetLast() {
		_ = in.w.Close()
	}
	return nil
}
