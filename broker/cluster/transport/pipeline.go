package transport

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// pipelineDepth is how many appends a pipeline holds before AppendEntries
// blocks (Raft's back-pressure).
const pipelineDepth = 128

// asyncSender is a sender that can send a Raft RPC without waiting for
// its answer: the gRPC Network, whose data stream keeps a group's appends
// in order. wait blocks for the answer and must be called once.
type asyncSender interface {
	startRaft(ctx context.Context, node, group string, cmd any) (wait func() (any, error), err error)
}

// pipeline is a group's AppendEntries pipeline to one target; futures come
// back on Consumer in the order the appends were made. Over a sender that
// can (asyncSender) appends go out at once, many under way; otherwise one
// after the other's answer.
type pipeline struct {
	g      *group
	target raft.ServerAddress
	async  asyncSender
	reqs   chan *appendFuture
	done   chan raft.AppendFuture

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

func newPipeline(g *group, target raft.ServerAddress) *pipeline {
	ctx, cancel := context.WithCancel(g.ctx)
	p := &pipeline{
		g: g, target: target,
		reqs: make(chan *appendFuture, pipelineDepth),
		done: make(chan raft.AppendFuture, pipelineDepth),
		ctx:  ctx, cancel: cancel,
	}
	p.async, _ = g.c.out.(asyncSender)
	go p.run()
	return p
}

func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &appendFuture{start: time.Now(), args: args, resp: resp, errCh: make(chan error, 1)}
	if p.ctx.Err() != nil {
		return nil, raft.ErrPipelineShutdown
	}
	if p.async != nil {
		ctx, cancel := context.WithTimeout(p.ctx, p.g.c.rpcTimeout)
		wait, err := p.async.startRaft(ctx, string(p.target), p.g.id, args)
		if err != nil {
			cancel()
			return nil, err
		}
		f.wait = func() (any, error) {
			defer cancel()
			return wait()
		}
	}
	select {
	case p.reqs <- f:
		return f, nil
	case <-p.ctx.Done():
		return nil, raft.ErrPipelineShutdown
	}
}

func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.done }

func (p *pipeline) Close() error {
	p.once.Do(func() {
		p.cancel()
		p.g.pipesMu.Lock()
		delete(p.g.pipes, p)
		p.g.pipesMu.Unlock()
	})
	return nil
}

// run completes the futures in order: waits for the answer of an append
// already sent, or sends it and waits.
func (p *pipeline) run() {
	for {
		select {
		case f := <-p.reqs:
			if f.wait != nil {
				f.errCh <- copyAnswer(f.wait, p.target, f.resp)
			} else {
				f.errCh <- call(p.g, p.target, f.args, f.resp, nil, p.g.c.rpcTimeout)
			}
			select {
			case p.done <- f:
			case <-p.ctx.Done():
				return
			}
		case <-p.ctx.Done():
			return
		}
	}
}

func copyAnswer(wait func() (any, error), target raft.ServerAddress, resp *raft.AppendEntriesResponse) error {
	out, err := wait()
	if err != nil {
		return err
	}
	r, ok := out.(*raft.AppendEntriesResponse)
	if !ok {
		return status.Errorf(codes.Internal, "node %q answered an append with a %T", target, out)
	}
	*resp = *r
	return nil
}

// appendFuture is one pipelined append's raft.AppendFuture.
type appendFuture struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	wait  func() (any, error) // set when the append is already sent

	errCh chan error
	err   error
	got   bool
}

func (f *appendFuture) Error() error {
	if !f.got {
		f.err, f.got = <-f.errCh, true
	}
	return f.err
}

func (f *appendFuture) Start() time.Time                    { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest { return f.args }
func (f *appendFuture) Response() *raft.AppendEntriesResponse {
	return f.resp
}
