package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var errClosed = errors.New("transport closed")

// group is one Raft group's transport on a Network: RPCs it sends go
// through the core's sender to the group of the same id on the target node;
// RPCs that arrive for it go to Raft's consumer channel, or to the
// heartbeat handler when one is set (so a heartbeat never waits behind a
// group busy on disk).
type group struct {
	c        *core
	id       string
	consumer chan raft.RPC

	ctx    context.Context // ends when the transport closes
	cancel context.CancelFunc

	hbMu sync.Mutex
	hb   func(raft.RPC)

	pipesMu sync.Mutex
	pipes   map[*pipeline]struct{}
}

var _ GroupTransport = (*group)(nil)

func newGroup(c *core, id string) *group {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &group{
		c: c, id: id, consumer: make(chan raft.RPC),
		ctx: ctx, cancel: func() { cancel(errUnreachable) },
		pipes: map[*pipeline]struct{}{},
	}
}

func (g *group) Consumer() <-chan raft.RPC     { return g.consumer }
func (g *group) LocalAddr() raft.ServerAddress { return raft.ServerAddress(g.c.node) }

func (g *group) SetHeartbeatHandler(cb func(raft.RPC)) {
	g.hbMu.Lock()
	defer g.hbMu.Unlock()
	g.hb = cb
}

// EncodePeer and DecodePeer keep the node name: addresses are the Network's business.
func (g *group) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }
func (g *group) DecodePeer(b []byte) raft.ServerAddress                     { return raft.ServerAddress(b) }

func (g *group) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return call(g, target, args, resp, nil, g.c.rpcTimeout)
}

func (g *group) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return call(g, target, args, resp, nil, g.c.rpcTimeout)
}

func (g *group) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return call(g, target, args, resp, nil, g.c.rpcTimeout)
}

func (g *group) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return call(g, target, args, resp, nil, g.c.rpcTimeout)
}

// snapshotRate is the slowest transfer an InstallSnapshot is given time for.
const snapshotRate = 1 << 20 // bytes per second

func (g *group) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	timeout := g.c.rpcTimeout + time.Duration(args.Size/snapshotRate)*time.Second
	return call(g, target, args, resp, data, timeout)
}

func (g *group) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	g.pipesMu.Lock()
	defer g.pipesMu.Unlock()
	if g.ctx.Err() != nil {
		return nil, raft.ErrPipelineShutdown
	}
	p := newPipeline(g, target)
	g.pipes[p] = struct{}{}
	return p, nil
}

// Close closes the transport: RPCs in flight and later ones fail, and the
// group's id may be opened again on the Network.
func (g *group) Close() error {
	g.c.forget(g)
	g.shut()
	return nil
}

func (g *group) shut() {
	g.cancel()
	g.pipesMu.Lock()
	pipes := make([]*pipeline, 0, len(g.pipes))
	for p := range g.pipes {
		pipes = append(pipes, p)
	}
	g.pipesMu.Unlock()
	for _, p := range pipes {
		p.Close()
	}
}

// call sends args to target's group and copies the answer into resp.
func call[Req, Resp any](g *group, target raft.ServerAddress, args *Req, resp *Resp, data io.Reader, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(g.ctx, timeout)
	defer cancel()
	out, err := g.send(ctx, string(target), args, data)
	if err != nil {
		return err
	}
	r, ok := out.(*Resp)
	if !ok {
		return status.Errorf(codes.Internal, "node %q answered a %T with a %T", target, args, out)
	}
	*resp = *r
	return nil
}

func (g *group) send(ctx context.Context, target string, cmd any, data io.Reader) (any, error) {
	if err := g.ctx.Err(); err != nil {
		return nil, unavailable(g.c.node, fmt.Errorf("group %q: %w", g.id, errClosed))
	}
	resp, err := g.c.out.sendRaft(ctx, target, g.id, cmd, data)
	if err != nil && ctx.Err() != nil && g.ctx.Err() != nil {
		return nil, unavailable(g.c.node, fmt.Errorf("group %q: %w", g.id, errClosed))
	}
	return resp, err
}

// start hands an RPC to Raft (its consumer channel, or the heartbeat
// handler) and returns how to wait for the answer: the receiving side of a
// pipeline hands a group's appends over in order and waits for them apart.
func (g *group) start(ctx context.Context, cmd any, data io.Reader) (wait func() (any, error), err error) {
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, Reader: data, RespChan: respCh}
	if fn := g.heartbeatFn(cmd); fn != nil {
		fn(rpc)
	} else {
		select {
		case g.consumer <- rpc:
		case <-ctx.Done():
			return nil, ctxStatus(ctx, g.c.node)
		case <-g.ctx.Done():
			return nil, status.Errorf(codes.Unavailable, "node %q: group %q closed", g.c.node, g.id)
		}
	}
	return func() (any, error) {
		select {
		case r := <-respCh:
			if r.Error != nil {
				return nil, asStatus(r.Error)
			}
			return r.Response, nil
		case <-ctx.Done():
			return nil, ctxStatus(ctx, g.c.node)
		case <-g.ctx.Done():
			return nil, status.Errorf(codes.Unavailable, "node %q: group %q closed", g.c.node, g.id)
		}
	}, nil
}

// heartbeatFn is the heartbeat handler if cmd is a heartbeat (an empty
// AppendEntries, the test hashicorp/raft's own NetworkTransport uses) and a
// handler is set. Raft v1.8 names the leader in the RPC header's Addr.
func (g *group) heartbeatFn(cmd any) func(raft.RPC) {
	if !isHeartbeat(cmd) {
		return nil
	}
	g.hbMu.Lock()
	defer g.hbMu.Unlock()
	return g.hb
}

func isHeartbeat(cmd any) bool {
	req, ok := cmd.(*raft.AppendEntriesRequest)
	if !ok {
		return false
	}
	return req.Term != 0 && req.Addr != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}
