package transport

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// answerAll answers every RPC that reaches group g (as a follower that
// always agrees would) until the test ends.
func answerAll(tb testing.TB, g GroupTransport) {
	ok := func(rpc raft.RPC) {
		switch rpc.Command.(type) {
		case *raft.AppendEntriesRequest:
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		default:
			rpc.Respond(nil, fmt.Errorf("unexpected %T", rpc.Command))
		}
	}
	g.SetHeartbeatHandler(ok)
	done := make(chan struct{})
	tb.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case rpc := <-g.Consumer():
				ok(rpc)
			case <-done:
				return
			}
		}
	}()
}

// BenchmarkGRPC sends heartbeats and one-entry appends between two gRPC
// Networks on loopback from 1, 100 and 1,000 groups at once (one sender
// per group, each waiting for its answer): RPCs/s, and frames/s with the
// messages a frame carried on average, which shows the batching.
func BenchmarkGRPC(b *testing.B) {
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("n1")}
	kinds := []struct {
		name string
		req  func(i uint64) *raft.AppendEntriesRequest
	}{
		{"heartbeat", func(uint64) *raft.AppendEntriesRequest {
			return &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 1}
		}},
		{"append", func(i uint64) *raft.AppendEntriesRequest {
			return &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 1, PrevLogEntry: i, PrevLogTerm: 1, LeaderCommitIndex: i,
				Entries: []*raft.Log{{Index: i + 1, Term: 1, Type: raft.LogCommand, Data: make([]byte, 100)}}}
		}},
	}
	for _, kind := range kinds {
		for _, groups := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/groups=%d", kind.name, groups), func(b *testing.B) {
				a, c := grpcNet(b, "n1", nil), grpcNet(b, "n2", nil)
				must(b, a.SetAddress("n2", c.Addr().String()))
				senders := make([]GroupTransport, groups)
				for i := range groups {
					id := fmt.Sprintf("q/%d", i)
					senders[i] = a.Group(id)
					answerAll(b, c.Group(id))
				}
				var resp raft.AppendEntriesResponse
				must(b, senders[0].AppendEntries("n2", "n2", kind.req(0), &resp)) // connect
				s0 := a.Stats()
				var sent atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, groups)
				b.ResetTimer()
				start := time.Now()
				for _, g := range senders {
					wg.Go(func() {
						var resp raft.AppendEntriesResponse
						for i := sent.Add(1); i <= int64(b.N); i = sent.Add(1) {
							if err := g.AppendEntries("n2", "n2", kind.req(uint64(i)), &resp); err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start).Seconds()
				b.StopTimer()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				s1 := a.Stats()
				frames := float64(s1.FramesSent - s0.FramesSent)
				msgs := float64(s1.MessagesSent - s0.MessagesSent)
				b.ReportMetric(float64(b.N)/elapsed, "rpcs/s")
				b.ReportMetric(frames/elapsed, "frames/s")
				b.ReportMetric(msgs/frames, "msgs/frame")
			})
		}
	}
}

// BenchmarkGRPCPipeline sends one-entry appends of one group through
// Raft's pipeline (up to 128 under way) between two gRPC Networks on
// loopback: appends/s and the messages a frame carried.
func BenchmarkGRPCPipeline(b *testing.B) {
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("n1")}
	a, c := grpcNet(b, "n1", nil), grpcNet(b, "n2", nil)
	must(b, a.SetAddress("n2", c.Addr().String()))
	g := a.Group("q/0")
	answerAll(b, c.Group("q/0"))
	p, err := g.AppendEntriesPipeline("n2", "n2")
	must(b, err)
	defer p.Close()
	s0 := a.Stats()
	errs := make(chan error, 1)
	go func() {
		for range b.N {
			f := <-p.Consumer()
			if err := f.Error(); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 1, PrevLogEntry: uint64(i), PrevLogTerm: 1, LeaderCommitIndex: uint64(i),
			Entries: []*raft.Log{{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: make([]byte, 100)}}}
		if _, err := p.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
			b.Fatal(err)
		}
	}
	must(b, <-errs)
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	s1 := a.Stats()
	b.ReportMetric(float64(b.N)/elapsed, "appends/s")
	b.ReportMetric(float64(s1.MessagesSent-s0.MessagesSent)/float64(s1.FramesSent-s0.FramesSent), "msgs/frame")
}
