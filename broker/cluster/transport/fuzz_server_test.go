package transport

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"google.golang.org/protobuf/proto"
)

// frameFeed is one end of a stream for a fuzz test: Recv gives the frames
// of in, then io.EOF; Send keeps nothing.
type frameFeed struct{ in chan *pb.Frame }

func (f *frameFeed) Send(*pb.Frame) error { return nil }

func (f *frameFeed) Recv() (*pb.Frame, error) {
	fr, ok := <-f.in
	if !ok {
		return nil, io.EOF
	}
	return fr, nil
}

// follower answers every RPC of group g like a Raft that agrees, reading
// snapshots whole, until done closes.
func follower(g GroupTransport, done <-chan struct{}) {
	answer := func(rpc raft.RPC) {
		switch c := rpc.Command.(type) {
		case *raft.AppendEntriesRequest:
			rpc.Respond(&raft.AppendEntriesResponse{Term: c.Term, Success: true}, nil)
		case *raft.RequestVoteRequest:
			rpc.Respond(&raft.RequestVoteResponse{Term: c.Term, Granted: true}, nil)
		case *raft.RequestPreVoteRequest:
			rpc.Respond(&raft.RequestPreVoteResponse{Term: c.Term, Granted: true}, nil)
		case *raft.TimeoutNowRequest:
			rpc.Respond(&raft.TimeoutNowResponse{}, nil)
		case *raft.InstallSnapshotRequest:
			_, err := io.Copy(io.Discard, io.LimitReader(rpc.Reader, c.Size))
			rpc.Respond(&raft.InstallSnapshotResponse{Term: c.Term, Success: err == nil}, nil)
		}
	}
	g.SetHeartbeatHandler(answer)
	for {
		select {
		case rpc := <-g.Consumer():
			answer(rpc)
		case <-done:
			return
		}
	}
}

// Whatever frames a peer with the join secret sends on any stream, the
// node neither panics nor hangs: the stream ends when the peer's does.
func FuzzServerStream(f *testing.F) {
	for _, v := range seedMessages() {
		m := &pb.Message{Id: 1, Group: "g"}
		if err := setRaftBody(m, v); err != nil {
			f.Fatal(err)
		}
		if in, ok := v.(*raft.InstallSnapshotRequest); ok {
			in.Size = 5
			_ = setRaftBody(m, in)
		}
		b, _ := proto.Marshal(&pb.Frame{Messages: []*pb.Message{m,
			{Id: 1, Body: &pb.Message_SnapshotChunk{SnapshotChunk: &pb.SnapshotChunk{Data: []byte("abcde"), Last: true}}},
			{Id: 2, Body: &pb.Message_Call{Call: &pb.CallRequest{Method: "echo", Payload: []byte("x")}}},
			{Id: 3, Body: &pb.Message_Ping{Ping: &pb.Ping{}}},
			{Id: 1, Body: &pb.Message_Cancel{Cancel: &pb.Cancel{}}},
		}})
		for kind := range numKinds {
			f.Add(uint8(kind), b)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		var fr pb.Frame
		if proto.Unmarshal(b, &fr) != nil {
			return
		}
		n := &GRPCNetwork{core: newCore("n2", nil, 50*time.Millisecond), log: slog.New(slog.DiscardHandler), maxMsg: 1 << 16, maxSnapshot: 1 << 16, heard: newHeard()}
		n.HandleOrdered("echo", Waiting(func(_ context.Context, _ string, req []byte) (func() ([]byte, error), error) {
			return func() ([]byte, error) { return req, nil }, nil
		}))
		n.Handle("echo2", func(_ context.Context, _ string, req []byte) ([]byte, error) { return req, nil })
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { follower(n.core.group("g"), done) })
		feed := &frameFeed{in: make(chan *pb.Frame, 1)}
		feed.in <- &fr
		close(feed.in)
		l := &serverLink{
			link: newLink(context.Background(), feed, &n.stats, queueBytes),
			n:    n, kind: streamKind(kind % uint8(numKinds)), from: "n1",
			inflight: map[uint64]context.CancelFunc{}, queues: map[string][]func(){}, snaps: map[uint64]*snapIn{},
		}
		served := make(chan error, 1)
		go func() { served <- l.serve() }()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end with the peer's")
		}
		close(done)
		wg.Wait()
		n.core.close()
	})
}
