package transport

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// pipelineDepth is how many appends a pipeline holds before AppendEntries
// blocks (Raft's back-pressure).
const pipelineDepth = 128

// pipeline is a group's AppendEntries pipeline to one target: appends go
// out in order, one after the other's answer, and their futures come back
// on Consumer in the same order.
type pipeline struct {
	g      *group
	target raft.ServerAddress
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
	go p.run()
	return p
}

func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &appendFuture{start: time.Now(), args: args, resp: resp, errCh: make(chan error, 1)}
	if p.ctx.Err() != nil {
		return nil, raft.ErrPipelineShutdown
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

func (p *pipeline) run() {
	for {
		select {
		case f := <-p.reqs:
			f.errCh <- call(p.g, p.target, f.args, f.resp, nil, p.g.c.rpcTimeout)
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

// appendFuture is one pipelined append's raft.AppendFuture.
type appendFuture struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse

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
