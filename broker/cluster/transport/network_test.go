package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A handler's status code and message arrive as they were; a plain error
// arrives as Unknown with its text; a method without a handler is
// Unimplemented; a call to the node itself runs in place.
func TestCallPreservesCodes(t *testing.T) {
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 2)
			a, b := f.nets[0], f.nets[1]
			b.Handle("echo", func(_ context.Context, from string, req []byte) ([]byte, error) {
				return fmt.Appendf(nil, "%s from %s", req, from), nil
			})
			for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
				b.Handle("code/"+c.String(), func(context.Context, string, []byte) ([]byte, error) {
					return nil, status.Errorf(c, "because %d", c)
				})
			}
			b.Handle("plain", func(context.Context, string, []byte) ([]byte, error) {
				return nil, errors.New("disk on fire")
			})
			a.Handle("self", func(_ context.Context, from string, _ []byte) ([]byte, error) {
				return []byte("me: " + from), nil
			})

			cases := []struct {
				node, method string
				code         codes.Code
				msg, resp    string
			}{
				{b.Node(), "echo", codes.OK, "", "hi from " + a.Node()},
				{a.Node(), "self", codes.OK, "", "me: " + a.Node()},
				{b.Node(), "plain", codes.Unknown, "disk on fire", ""},
				{b.Node(), "nope", codes.Unimplemented, "", ""},
				{"nobody", "echo", codes.Unavailable, "", ""},
			}
			for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
				cases = append(cases, struct {
					node, method string
					code         codes.Code
					msg, resp    string
				}{b.Node(), "code/" + c.String(), c, fmt.Sprintf("because %d", c), ""})
			}
			for _, tc := range cases {
				resp, err := a.Call(context.Background(), tc.node, tc.method, []byte("hi"))
				if got := status.Code(err); got != tc.code {
					t.Errorf("%s on %s: code %v (%v), want %v", tc.method, tc.node, got, err, tc.code)
					continue
				}
				if tc.msg != "" && status.Convert(err).Message() != tc.msg {
					t.Errorf("%s: message %q, want %q", tc.method, status.Convert(err).Message(), tc.msg)
				}
				if string(resp) != tc.resp {
					t.Errorf("%s: answer %q, want %q", tc.method, resp, tc.resp)
				}
			}
		})
	}
}

// A call whose context ends gives Canceled or DeadlineExceeded; a call to
// a cut-off or closed peer, and one in flight when the link is cut, gives
// Unavailable.
func TestCallFailures(t *testing.T) {
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 3)
			a, b, c := f.nets[0], f.nets[1], f.nets[2]
			entered := make(chan struct{}, 1)
			block := func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
				entered <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			b.Handle("block", block)
			c.Handle("block", block)
			b.Handle("ok", func(context.Context, string, []byte) ([]byte, error) { return []byte("ok"), nil })

			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if _, err := a.Call(ctx, b.Node(), "block", nil); status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("call past its deadline: %v, want DeadlineExceeded", err)
			}
			<-entered

			ctx, cancel = context.WithCancel(context.Background())
			go func() { <-entered; cancel() }()
			if _, err := a.Call(ctx, b.Node(), "block", nil); status.Code(err) != codes.Canceled {
				t.Errorf("cancelled call: %v, want Canceled", err)
			}

			// In flight when the link is cut.
			errc := make(chan error, 1)
			go func() {
				_, err := a.Call(context.Background(), c.Node(), "block", nil)
				errc <- err
			}()
			<-entered
			f.isolate(c.Node())
			if err := <-errc; status.Code(err) != codes.Unavailable {
				t.Errorf("call in flight across a cut link: %v, want Unavailable", err)
			}
			if _, err := a.Call(context.Background(), c.Node(), "ok", nil); status.Code(err) != codes.Unavailable {
				t.Errorf("call to a cut-off node: %v, want Unavailable", err)
			}
			f.heal()

			must(t, b.Close())
			eventually.Succeeds(t, 10*time.Second, "calls to a closed node fail with Unavailable", func() error {
				if _, err := a.Call(context.Background(), b.Node(), "ok", nil); status.Code(err) != codes.Unavailable {
					return fmt.Errorf("got %v", err)
				}
				return nil
			})
		})
	}
}

// Handlers run concurrently: n calls are all inside the handler at once.
func TestHandlersRunConcurrently(t *testing.T) {
	const n = 32
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 2)
			a, b := f.nets[0], f.nets[1]
			var mu sync.Mutex
			inside := 0
			all := make(chan struct{})
			b.Handle("wait", func(ctx context.Context, _ string, req []byte) ([]byte, error) {
				mu.Lock()
				if inside++; inside == n {
					close(all)
				}
				mu.Unlock()
				select {
				case <-all:
					return req, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					resp, err := a.Call(ctx, b.Node(), "wait", fmt.Appendf(nil, "%d", i))
					if err == nil && string(resp) != fmt.Sprint(i) {
						err = fmt.Errorf("call %d answered %q", i, resp)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("%v (handlers did not all run at once)", err)
				}
			}
		})
	}
}

// A Raft RPC for a group the target has not opened (or closed) fails with
// Unavailable; Group gives the same transport until it is closed.
func TestGroupNotOpenOnTarget(t *testing.T) {
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 2)
			a, b := f.nets[0], f.nets[1]
			g := a.Group("q/x")
			if a.Group("q/x") != g {
				t.Fatal("Group twice gave two transports")
			}
			req := &raft.RequestVoteRequest{Term: 1, LastLogIndex: 1, LastLogTerm: 1}
			var resp raft.RequestVoteResponse
			err := g.RequestVote(raft.ServerID(b.Node()), raft.ServerAddress(b.Node()), req, &resp)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("vote to a group not open on the target: %v, want Unavailable", err)
			}
			bg := b.Group("q/x")
			go func() {
				rpc := <-bg.Consumer()
				rpc.Respond(&raft.RequestVoteResponse{Term: 1, Granted: true}, nil)
			}()
			must(t, g.RequestVote(raft.ServerID(b.Node()), raft.ServerAddress(b.Node()), req, &resp))
			if !resp.Granted || resp.Term != 1 {
				t.Fatalf("vote answer %+v, want granted in term 1", resp)
			}
			must(t, bg.Close())
			err = g.RequestVote(raft.ServerID(b.Node()), raft.ServerAddress(b.Node()), req, &resp)
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("vote to a closed group: %v, want Unavailable", err)
			}
			if b.Group("q/x") == bg {
				t.Fatal("Group after Close gave the closed transport")
			}
		})
	}
}

// Watch reports a peer down when it is cut off or closes, up when it is
// reachable again.
func TestWatchReportsPeers(t *testing.T) {
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 3)
			a := f.nets[0]
			var mu sync.Mutex
			state := map[string]bool{}
			stop := a.Watch(func(node string, up bool) {
				mu.Lock()
				defer mu.Unlock()
				state[node] = up
			})
			defer stop()
			is := func(node string, up bool) func() bool {
				return func() bool {
					mu.Lock()
					defer mu.Unlock()
					v, ok := state[node]
					return ok && v == up
				}
			}
			f.isolate(f.nets[1].Node())
			eventually.True(t, 10*time.Second, "n2 down", is(f.nets[1].Node(), false))
			f.heal()
			eventually.True(t, 10*time.Second, "n2 up", is(f.nets[1].Node(), true))
			must(t, f.nets[2].Close())
			eventually.True(t, 10*time.Second, "n3 down", is(f.nets[2].Node(), false))
		})
	}
}

// A heartbeat goes to the group's heartbeat handler, never through the
// consumer channel (where it would wait behind a group busy on disk); any
// other append goes to the consumer.
func TestHeartbeatsTakeTheFastPath(t *testing.T) {
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 2)
			a, b := f.nets[0], f.nets[1]
			g, bg := a.Group("meta"), b.Group("meta")
			bg.SetHeartbeatHandler(func(rpc raft.RPC) {
				rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
			})
			target := raft.ServerAddress(b.Node())
			hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte(a.Node())}, Term: 7}
			var resp raft.AppendEntriesResponse
			must(t, g.AppendEntries(raft.ServerID(b.Node()), target, hb, &resp))
			if !resp.Success || resp.Term != 7 {
				t.Fatalf("heartbeat answer %+v", resp)
			}
			go func() {
				rpc := <-bg.Consumer()
				rpc.Respond(&raft.AppendEntriesResponse{Term: 7, LastLog: 3}, nil)
			}()
			app := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte(a.Node())}, Term: 7, PrevLogEntry: 2, PrevLogTerm: 7,
				Entries: []*raft.Log{{Index: 3, Term: 7, Type: raft.LogCommand, Data: []byte("x")}}, LeaderCommitIndex: 2}
			must(t, g.AppendEntries(raft.ServerID(b.Node()), target, app, &resp))
			if resp.LastLog != 3 || resp.Success {
				t.Fatalf("append answer %+v, want the consumer's (LastLog 3)", resp)
			}
		})
	}
}

// A snapshot of several chunks arrives whole, byte for byte; one for a
// group the target has not opened fails with Unavailable.
func TestInstallSnapshotCarriesTheData(t *testing.T) {
	for _, fb := range fabrics {
		t.Run(fb.name, func(t *testing.T) {
			f := fb.make(t, 2)
			a, b := f.nets[0], f.nets[1]
			snapData := make([]byte, 1<<20+12345)
			for i := range snapData {
				snapData[i] = byte(i * 7)
			}
			conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "n1"}}})
			req := &raft.InstallSnapshotRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte(a.Node())},
				SnapshotVersion: raft.SnapshotVersionMax, Term: 2, LastLogIndex: 40, LastLogTerm: 2, Configuration: conf, Size: int64(len(snapData))}
			var resp raft.InstallSnapshotResponse
			g := a.Group("q/s")
			err := g.InstallSnapshot(raft.ServerID(b.Node()), raft.ServerAddress(b.Node()), req, &resp, bytes.NewReader(snapData))
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("snapshot to a group not open: %v, want Unavailable", err)
			}
			bg := b.Group("q/s")
			got := make(chan []byte, 1)
			go func() {
				rpc := <-bg.Consumer()
				data, err := io.ReadAll(io.LimitReader(rpc.Reader, rpc.Command.(*raft.InstallSnapshotRequest).Size))
				got <- data
				rpc.Respond(&raft.InstallSnapshotResponse{Term: 2, Success: err == nil}, nil)
			}()
			must(t, g.InstallSnapshot(raft.ServerID(b.Node()), raft.ServerAddress(b.Node()), req, &resp, bytes.NewReader(snapData)))
			if !resp.Success {
				t.Fatal("the follower could not read the snapshot")
			}
			if !bytes.Equal(<-got, snapData) {
				t.Fatal("the snapshot arrived changed")
			}
		})
	}
}
