package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/brokertest/logcapture"
	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"github.com/warrenmq/warren/broker/tlstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func echo(_ context.Context, from string, req []byte) ([]byte, error) {
	return fmt.Appendf(nil, "%s from %s", req, from), nil
}

// Hello gives the name of the node behind an address.
func TestHelloNamesTheNode(t *testing.T) {
	a, b := grpcNet(t, "n1", nil), grpcNet(t, "n2", nil)
	name, err := a.Hello(context.Background(), b.Addr().String())
	must(t, err)
	if name != "n2" {
		t.Fatalf("Hello answered %q, want n2", name)
	}
}

// A peer without the join secret (or with another one) is refused with
// Unauthenticated, logged with its address, and none of its calls runs.
func TestJoinSecretRefusesStrangers(t *testing.T) {
	logs, log := logcapture.New()
	b := grpcNet(t, "n2", func(c *Config) { c.Logger = log })
	ran := false
	var mu sync.Mutex
	b.Handle("echo", func(ctx context.Context, from string, req []byte) ([]byte, error) {
		mu.Lock()
		ran = true
		mu.Unlock()
		return echo(ctx, from, req)
	})
	stranger := grpcNet(t, "n9", func(c *Config) { c.Secret = "another" })
	must(t, stranger.SetAddress("n2", b.Addr().String()))
	if _, err := stranger.Call(context.Background(), "n2", "echo", []byte("hi")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("call with another secret: %v, want Unauthenticated", err)
	}
	if _, err := stranger.Hello(context.Background(), b.Addr().String()); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Hello with another secret: %v, want Unauthenticated", err)
	}

	// No secret at all: a plain gRPC client.
	conn, err := grpc.NewClient(b.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), mdNode, "n8")
	st, err := pb.NewClusterClient(conn).Data(ctx)
	must(t, err)
	// Send fails with io.EOF if the refusal came first; Recv has the status.
	_ = st.Send(&pb.Frame{Messages: []*pb.Message{{Id: 1, Body: &pb.Message_Call{Call: &pb.CallRequest{Method: "echo"}}}}})
	if _, err := st.Recv(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("stream without a secret: %v, want Unauthenticated", err)
	}
	mu.Lock()
	strangerRan := ran
	mu.Unlock()
	if strangerRan {
		t.Fatal("a handler ran for a peer without the join secret")
	}
	refused := 0
	for _, l := range logs.Lines(slog.LevelWarn) {
		if strings.Contains(l.Msg, "join secret") {
			refused++
			if !strings.HasPrefix(l.Attrs["addr"], "127.0.0.1:") {
				t.Fatalf("refusal logged without the peer's address: %v", l)
			}
		}
	}
	if refused == 0 {
		t.Fatalf("no refusal logged: %v", logs.Lines(slog.LevelDebug))
	}
	good := grpcNet(t, "n1", nil)
	must(t, good.SetAddress("n2", b.Addr().String()))
	resp, err := good.Call(context.Background(), "n2", "echo", []byte("hi"))
	if err != nil || string(resp) != "hi from n1" {
		t.Fatalf("call with the secret: %q, %v", resp, err)
	}
}

// nodeTLS is the mutual-TLS configuration of a node with a certificate of
// ca (nil: none).
func nodeTLS(t *testing.T, ca *tlstest.CA, withCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: ca.Pool(), ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if withCert {
		certPEM, keyPEM := ca.Issue(t, "node", x509.ExtKeyUsageAny)
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		must(t, err)
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// With TLS configured, nodes with certificates of the cluster CA talk; a
// node without a client certificate, or with one of another CA, is refused
// and none of its calls runs.
func TestMutualTLS(t *testing.T) {
	ca, other := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "other")
	b := grpcNet(t, "n2", func(c *Config) { c.TLS = nodeTLS(t, ca, true) })
	b.Handle("echo", echo)
	cases := []struct {
		name string
		tls  *tls.Config
		ok   bool
	}{
		{"certificate of the cluster CA", nodeTLS(t, ca, true), true},
		{"no client certificate", nodeTLS(t, ca, false), false},
		{"certificate of another CA", func() *tls.Config { c := nodeTLS(t, other, true); c.RootCAs = ca.Pool(); return c }(), false},
		{"no TLS", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := grpcNet(t, "n1", func(c *Config) { c.TLS = tc.tls })
			must(t, a.SetAddress("n2", b.Addr().String()))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := a.Call(ctx, "n2", "echo", []byte("hi"))
			if tc.ok && (err != nil || string(resp) != "hi from n1") {
				t.Fatalf("call: %q, %v", resp, err)
			}
			p, perr := a.peer("n2")
			must(t, perr)
			if tc.ok && (p.laneless.Load() != nil || p.openLink(calls) == nil) {
				t.Fatal("the call did not take the call lane (over mutual TLS)")
			}
			if !tc.ok && p.laneless.Load() != nil {
				t.Fatal("a refused TLS peer was taken for a node without call lanes")
			}
			if !tc.ok && status.Code(err) != codes.Unavailable {
				t.Fatalf("call: %q, %v; want refused (Unavailable)", resp, err)
			}
		})
	}
}

// A peer that restarts (on the same address) is redialled: calls fail with
// Unavailable while it is down and succeed again once it is back, and
// Watch reports it down and up.
func TestPeerRestartIsRedialled(t *testing.T) {
	a, b := grpcNet(t, "n1", nil), grpcNet(t, "n2", nil)
	addr := b.Addr().String()
	b.Handle("echo", echo)
	var mu sync.Mutex
	var events []bool
	stop := a.Watch(func(node string, up bool) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, up)
	})
	defer stop()
	must(t, a.SetAddress("n2", addr))
	_, err := a.Call(context.Background(), "n2", "echo", []byte("1"))
	must(t, err)
	// Watch is told apart from calls (a call may take the lane before the
	// gRPC connection is ready): wait for its first word.
	eventually.True(t, 10*time.Second, "Watch saw n2 up", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) > 0 && events[0]
	})

	must(t, b.Close())
	if _, err := a.Call(context.Background(), "n2", "echo", []byte("2")); status.Code(err) != codes.Unavailable {
		t.Fatalf("call to a stopped peer: %v, want Unavailable", err)
	}
	eventually.True(t, 10*time.Second, "Watch saw n2 down", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) > 0 && !events[len(events)-1]
	})
	b2 := grpcNet(t, "n2", func(c *Config) { c.Addr = addr })
	b2.Handle("echo", echo)
	eventually.Succeeds(t, 15*time.Second, "calls reach the restarted peer", func() error {
		_, err := a.Call(context.Background(), "n2", "echo", []byte("3"))
		return err
	})
	eventually.Succeeds(t, 10*time.Second, "Watch saw n2 up, down, up", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(events) < 3 || !events[0] || !slices.Contains(events, false) || !events[len(events)-1] {
			return fmt.Errorf("events %v", events)
		}
		return nil
	})
}

// A malformed message closes its stream with InvalidArgument (nothing
// panics) and the node goes on serving.
func TestMalformedMessageClosesTheStream(t *testing.T) {
	b := grpcNet(t, "n2", nil)
	b.Handle("echo", echo)
	b.Group("g")
	conn, err := grpc.NewClient(b.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), mdSecret, testSecret, mdNode, "n1")
	bad := []*pb.Message{
		{Id: 1},
		{Id: 2, Group: "g", Body: &pb.Message_AppendEntries{AppendEntries: &pb.AppendEntriesRequest{Header: &pb.RPCHeader{ProtocolVersion: 99}}}},
		{Id: 3, Group: "g", Body: &pb.Message_AppendEntries{AppendEntries: &pb.AppendEntriesRequest{Header: &pb.RPCHeader{ProtocolVersion: 3},
			Entries: []*pb.Log{{Type: 5, Data: []byte("not msgpack")}}}}},
		{Id: 4, Group: "g", Body: &pb.Message_AppendEntriesResp{AppendEntriesResp: &pb.AppendEntriesResponse{}}},
	}
	for _, m := range bad {
		st, err := pb.NewClusterClient(conn).Data(ctx)
		must(t, err)
		must(t, st.Send(&pb.Frame{Messages: []*pb.Message{m}}))
		if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("message %d: %v, want the stream closed with InvalidArgument", m.GetId(), err)
		}
	}
	a := grpcNet(t, "n1", nil)
	must(t, a.SetAddress("n2", b.Addr().String()))
	if _, err := a.Call(context.Background(), "n2", "echo", []byte("hi")); err != nil {
		t.Fatalf("the node stopped serving after malformed messages: %v", err)
	}
}

// A call or an answer bigger than MaxMessageBytes fails with
// ResourceExhausted before it is sent, and the stream goes on.
func TestMessageSizeBound(t *testing.T) {
	a := grpcNet(t, "n1", func(c *Config) { c.MaxMessageBytes = 1 << 10 })
	b := grpcNet(t, "n2", func(c *Config) { c.MaxMessageBytes = 1 << 10 })
	b.Handle("echo", echo)
	must(t, a.SetAddress("n2", b.Addr().String()))
	if _, err := a.Call(context.Background(), "n2", "echo", make([]byte, 2<<10)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized call: %v, want ResourceExhausted", err)
	}
	if _, err := a.Call(context.Background(), "n2", "echo", []byte("small")); err != nil {
		t.Fatalf("small call after an oversized one: %v", err)
	}
	b.Handle("big", func(context.Context, string, []byte) ([]byte, error) { return make([]byte, 2<<10), nil })
	if _, err := a.Call(context.Background(), "n2", "big", nil); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized answer: %v, want ResourceExhausted", err)
	}
	if _, err := a.Call(context.Background(), "n2", "echo", []byte("small")); err != nil {
		t.Fatalf("small call after an oversized answer: %v", err)
	}
}

// Over gRPC the pipeline keeps many appends under way: the follower holds
// all of them before it answers any, they arrive in order, and the futures
// come back in that order with their own answers.
func TestPipelineKeepsAppendsUnderWayInOrder(t *testing.T) {
	const n = 20
	a, b := grpcNet(t, "n1", nil), grpcNet(t, "n2", nil)
	must(t, a.SetAddress("n2", b.Addr().String()))
	g, bg := a.Group("q/p"), b.Group("q/p")
	p, err := g.AppendEntriesPipeline("n2", "n2")
	must(t, err)
	defer p.Close()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, Addr: []byte("n1")}
	resps := make([]raft.AppendEntriesResponse, n)
	for i := range n {
		req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 1, PrevLogEntry: uint64(i), PrevLogTerm: 1,
			Entries: []*raft.Log{{Index: uint64(i + 1), Term: 1, Data: []byte("x")}}}
		if _, err := p.AppendEntries(req, &resps[i]); err != nil {
			t.Fatal(err)
		}
	}
	var held []raft.RPC
	for len(held) < n {
		select {
		case rpc := <-bg.Consumer():
			idx := rpc.Command.(*raft.AppendEntriesRequest).Entries[0].Index
			if idx != uint64(len(held)+1) {
				t.Fatalf("append %d arrived as number %d", idx, len(held)+1)
			}
			held = append(held, rpc)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d appends arrived before any was answered: not pipelined", len(held), n)
		}
	}
	for i, rpc := range held {
		rpc.Respond(&raft.AppendEntriesResponse{Term: 1, LastLog: uint64(i + 1), Success: true}, nil)
	}
	for i := range n {
		f := <-p.Consumer()
		must(t, f.Error())
		if got := f.Response().LastLog; got != uint64(i+1) || f.Request().Entries[0].Index != uint64(i+1) {
			t.Fatalf("future %d: request %d, answer LastLog %d", i, f.Request().Entries[0].Index, got)
		}
	}
}

// A peer that stops answering while its connection stands (a hung process,
// a black-holed link) is reported down by the node heartbeat within its
// timeout, and up again once it answers.
func TestHungPeerIsReportedDown(t *testing.T) {
	fast := func(c *Config) { c.PingInterval, c.PingTimeout = 100*time.Millisecond, 500*time.Millisecond }
	a, b := grpcNet(t, "n1", fast), grpcNet(t, "n2", fast)
	p := newProxy(t, b.Addr().String())
	var mu sync.Mutex
	state := map[string]bool{}
	stop := a.Watch(func(node string, up bool) {
		mu.Lock()
		defer mu.Unlock()
		state[node] = up
	})
	defer stop()
	is := func(up bool) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			v, ok := state["n2"]
			return ok && v == up
		}
	}
	must(t, a.SetAddress("n2", p.addr()))
	eventually.True(t, 10*time.Second, "n2 up", is(true))
	p.freeze(true)
	eventually.True(t, 10*time.Second, "the hung n2 reported down", is(false))
	p.freeze(false)
	eventually.True(t, 10*time.Second, "n2 up again once it answers", is(true))
}

// An empty address forgets a node: calls to it fail with Unavailable.
func TestSetAddressEmptyForgetsTheNode(t *testing.T) {
	a, b := grpcNet(t, "n1", nil), grpcNet(t, "n2", nil)
	b.Handle("echo", echo)
	must(t, a.SetAddress("n2", b.Addr().String()))
	_, err := a.Call(context.Background(), "n2", "echo", nil)
	must(t, err)
	must(t, a.SetAddress("n2", ""))
	if _, err := a.Call(context.Background(), "n2", "echo", nil); status.Code(err) != codes.Unavailable {
		t.Fatalf("call to a forgotten node: %v, want Unavailable", err)
	}
}
