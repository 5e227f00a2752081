package transport

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"github.com/warrenmq/warren/broker/tlstest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// hello is a lane's opening after its magic: node name and secret.
func hello(node, secret string) []byte { return appendHello(nil, node, secret) }

// laneFrame is one lane frame: a length and the Frame's encoding.
func laneFrame(t testing.TB, msgs ...*pb.Message) []byte {
	b, err := proto.Marshal(&pb.Frame{Messages: msgs})
	must(t, err)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// Calls and Sends go on the call lane, not on a gRPC stream: after them
// the peer's connection has its lane open and no data stream (nothing
// else needed one), and the peer's handler saw the calling node's name.
func TestCallsTakeTheLane(t *testing.T) {
	a, b := grpcNet(t, "n1", nil), grpcNet(t, "n2", nil)
	b.Handle("echo", echo)
	must(t, a.SetAddress("n2", b.Addr().String()))
	resp, err := a.Call(context.Background(), "n2", "echo", []byte("hi"))
	if err != nil || string(resp) != "hi from n1" {
		t.Fatalf("call: %q, %v", resp, err)
	}
	done := make(chan error, 1)
	must(t, a.Send(context.Background(), "n2", "echo", []byte("hey"), func(_ []byte, err error) { done <- err }))
	must(t, <-done)
	p, err := a.peer("n2")
	must(t, err)
	if p.openLink(calls) == nil {
		t.Fatal("no call lane open after a call")
	}
	if p.openLink(data) != nil {
		t.Fatal("a call opened the gRPC data stream")
	}
}

// olderNode serves b's Cluster service on a listener of its own with a
// plain gRPC server, without call lanes, as a node of a version before
// them does; it returns the address.
func olderNode(t *testing.T, b *GRPCNetwork, creds credentials.TransportCredentials) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	opts := []grpc.ServerOption{grpc.InitialWindowSize(windowBytes), grpc.InitialConnWindowSize(windowBytes)}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterClusterServer(srv, &service{n: b})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// A peer that does not know lanes (an older node's gRPC server answers a
// lane's magic with its SETTINGS frame) gets the calls on the data stream,
// Sends in the order they were made; once the connection to it broke and
// came back (the node upgraded), the lane is tried again.
func TestPeerWithoutLanesGetsCallsOnTheDataStream(t *testing.T) {
	b := grpcNet(t, "n2", nil)
	var mu sync.Mutex
	var got []string
	b.HandleOrdered("ord", Waiting(func(_ context.Context, _ string, req []byte) (func() ([]byte, error), error) {
		mu.Lock()
		got = append(got, string(req))
		mu.Unlock()
		return func() ([]byte, error) { return req, nil }, nil
	}))
	b.Handle("echo", echo)
	px := newProxy(t, olderNode(t, b, nil))
	a := grpcNet(t, "n1", nil)
	must(t, a.SetAddress("n2", px.addr()))

	const n = 200
	answers := make(chan error, n)
	for i := range n {
		must(t, a.Send(context.Background(), "n2", "ord", []byte(strconv.Itoa(i)), func(_ []byte, err error) { answers <- err }))
	}
	for range n {
		must(t, <-answers)
	}
	mu.Lock()
	for i, s := range got {
		if s != strconv.Itoa(i) {
			mu.Unlock()
			t.Fatalf("call %d started as %q: Sends out of order", i, s)
		}
	}
	mu.Unlock()
	p, err := a.peer("n2")
	must(t, err)
	if l := p.laneless.Load(); l == nil || l != p.openLink(data) || p.openLink(calls) != nil {
		t.Fatalf("calls to a peer without lanes: on the data stream %v, lane open %v", l != nil && l == p.openLink(data), p.openLink(calls) != nil)
	}

	// The peer comes back knowing lanes (an upgraded node).
	px.setTarget(b.Addr().String())
	px.setCut(true)
	eventually.True(t, 10*time.Second, "the connection to n2 broke", func() bool { return p.openCallLink() == nil })
	px.setCut(false)
	eventually.Succeeds(t, 15*time.Second, "calls take the lane again", func() error {
		if _, err := a.Call(context.Background(), "n2", "echo", []byte("hi")); err != nil {
			return err
		}
		if p.openLink(calls) == nil {
			return fmt.Errorf("no lane open")
		}
		return nil
	})
}

// A lane's opening without the join secret is refused with its reason and
// runs nothing; a peer with the secret that sends a frame too big or not
// a Frame has its lane closed (nothing panics), and the node goes on
// serving.
func TestLaneRefusesStrangersAndMalformedFrames(t *testing.T) {
	b := grpcNet(t, "n2", func(c *Config) { c.MaxMessageBytes = 1 << 10 })
	var ran atomic.Int32
	b.Handle("echo", func(ctx context.Context, from string, req []byte) ([]byte, error) {
		ran.Add(1)
		return echo(ctx, from, req)
	})
	call := laneFrame(t, &pb.Message{Id: 1, Body: &pb.Message_Call{Call: &pb.CallRequest{Method: "echo", Payload: []byte("x")}}})
	cases := []struct {
		name    string
		opening []byte
		send    []byte
		refused bool
	}{
		{"another secret", hello("n9", "another"), call, true},
		{"no secret", hello("n9", ""), call, true},
		{"no node name", hello("", testSecret), call, true},
		{"a frame past the bound", hello("n1", testSecret), binary.BigEndian.AppendUint32(nil, 1<<30), false},
		{"not a Frame", hello("n1", testSecret), append(binary.BigEndian.AppendUint32(nil, 4), 0xff, 0xff, 0xff, 0xff), false},
		{"frames before the answer", append(hello("n1", testSecret), call...), nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", b.Addr().String())
			must(t, err)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Write(append([]byte(laneMagic), tc.opening...))
			must(t, err)
			r := bufio.NewReader(c)
			head := make([]byte, len(laneMagic))
			_, err = io.ReadFull(r, head)
			must(t, err)
			answer, err := r.ReadByte()
			must(t, err)
			if string(head) != laneMagic {
				t.Fatalf("answer starts %q, not the lane's magic", head)
			}
			if tc.refused {
				code, _ := r.ReadByte()
				reason, err := readField(r)
				if answer != laneRefused || codes.Code(code) == codes.OK || err != nil || len(reason) == 0 {
					t.Fatalf("answer %d, code %d, reason %q (%v); want refused with a code and a reason", answer, code, reason, err)
				}
			} else if answer != laneOK {
				t.Fatalf("answer %d to an opening with the secret", answer)
			}
			_, _ = c.Write(tc.send)
			// Closed: EOF, or a reset when the write came after the close.
			if n, err := io.Copy(io.Discard, r); n != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("lane not closed: read %d bytes, %v", n, err)
			}
		})
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d calls ran for refused or malformed lanes", n)
	}
	a := grpcNet(t, "n1", func(c *Config) { c.MaxMessageBytes = 1 << 10 })
	must(t, a.SetAddress("n2", b.Addr().String()))
	if resp, err := a.Call(context.Background(), "n2", "echo", []byte("hi")); err != nil || string(resp) != "hi from n1" {
		t.Fatalf("the node stopped serving after bad lanes: %q, %v", resp, err)
	}
}

// Whatever a dialler sends after the lane's magic, the node neither panics
// nor hangs, and runs a call only for an opening with the join secret.
func FuzzLaneOpening(f *testing.F) {
	call := laneFrame(f, &pb.Message{Id: 1, Body: &pb.Message_Call{Call: &pb.CallRequest{Method: "echo", Payload: []byte("x")}}})
	f.Add(append(hello("n1", testSecret), call...))
	f.Add(append(hello("n1", "wrong"), call...))
	f.Add(append(hello("n1", testSecret), laneFrame(f,
		&pb.Message{Id: 2, Body: &pb.Message_Call{Call: &pb.CallRequest{Method: "echo"}}},
		&pb.Message{Id: 2, Body: &pb.Message_Cancel{Cancel: &pb.Cancel{}}},
		&pb.Message{Id: 3, Body: &pb.Message_Ping{Ping: &pb.Ping{}}})...))
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		n := &GRPCNetwork{core: newCore("n2", nil, 50*time.Millisecond), log: slog.New(slog.DiscardHandler), cfg: Config{Secret: testSecret},
			secret: sha256.Sum256([]byte(testSecret)), maxMsg: 1 << 16, maxSnapshot: 1 << 16, heard: newHeard(), ctx: ctx}
		var ran atomic.Int32
		n.Handle("echo", func(_ context.Context, _ string, req []byte) ([]byte, error) {
			ran.Add(1)
			return req, nil
		})
		c1, c2 := net.Pipe()
		served := make(chan struct{})
		go func() {
			defer close(served)
			n.serveLane(c2)
		}()
		// As a dialler does: the hello, then (once answered) the frames.
		answered := make(chan struct{})
		go func() {
			_, _ = io.ReadFull(c1, make([]byte, len(laneMagic)+1))
			close(answered)
			_, _ = io.Copy(io.Discard, c1)
		}()
		if hl, whole := helloLen(b); whole {
			_, _ = c1.Write(b[:hl])
			select {
			case <-answered:
			case <-served:
			}
			_, _ = c1.Write(b[hl:])
		} else {
			_, _ = c1.Write(b)
		}
		_ = c1.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatal("the lane did not end with the dialler's connection")
		}
		n.core.close()
		if ran.Load() > 0 && !carriesSecret(b) {
			t.Fatal("a call ran on a lane opened without the join secret")
		}
	})
}

// helloLen is the length of the hello at b's start; whole is false when b
// does not hold all of one.
func helloLen(b []byte) (n int, whole bool) {
	for range 2 {
		if len(b) < n+2 {
			return 0, false
		}
		n += 2 + int(binary.BigEndian.Uint16(b[n:]))
	}
	return n, n <= len(b)
}

// carriesSecret reports whether a lane's opening b names a node and
// carries the test's join secret.
func carriesSecret(b []byte) bool {
	field := func() ([]byte, bool) {
		if len(b) < 2 {
			return nil, false
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return nil, false
		}
		v := b[2 : 2+n]
		b = b[2+n:]
		return v, true
	}
	node, ok := field()
	if !ok || len(node) == 0 {
		return false
	}
	secret, ok := field()
	return ok && string(secret) == testSecret
}

// Across TLS settings: a TLS node calling an older TLS node (its gRPC
// server closes the connection during the handshake) uses the data
// stream; a TLS node calling a node without TLS is refused with the
// reason and Unavailable, not taken for an older node.
func TestLaneAcrossTLSSettings(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster")
	a := grpcNet(t, "n1", func(c *Config) { c.TLS = nodeTLS(t, ca, true) })

	older := grpcNet(t, "n2", func(c *Config) { c.TLS = nodeTLS(t, ca, true) })
	older.Handle("echo", echo)
	srvTLS := nodeTLS(t, ca, true)
	srvTLS.ClientAuth = tls.RequireAndVerifyClientCert
	must(t, a.SetAddress("n2", olderNode(t, older, credentials.NewTLS(srvTLS))))
	if resp, err := a.Call(context.Background(), "n2", "echo", []byte("hi")); err != nil || string(resp) != "hi from n1" {
		t.Fatalf("call to an older TLS node: %q, %v", resp, err)
	}
	if p, err := a.peer("n2"); err != nil || p.laneless.Load() == nil {
		t.Fatalf("an older TLS node not taken for one without lanes (%v)", err)
	}

	plain := grpcNet(t, "n3", nil)
	plain.Handle("echo", echo)
	must(t, a.SetAddress("n3", plain.Addr().String()))
	if _, err := a.Call(context.Background(), "n3", "echo", []byte("hi")); status.Code(err) != codes.Unavailable {
		t.Fatalf("call to a node without TLS: %v; want Unavailable", err)
	}
	if p, perr := a.peer("n3"); perr != nil || p.laneless.Load() != nil {
		t.Fatalf("a node without TLS taken for one without lanes (%v)", perr)
	}
	// The lane's own answer says why (a call may fail before it dials,
	// once gRPC's connection failed).
	for _, tc := range []struct {
		from *GRPCNetwork
		to   string
		want string
	}{
		{a, plain.Addr().String(), "no TLS"},
		{grpcNet(t, "n4", nil), older.Addr().String(), "requires TLS"},
	} {
		_, err := tc.from.dialLane(context.Background(), "n", tc.to)
		if status.Code(err) != codes.Unavailable || !errors.As(err, new(refusedError)) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("lane across TLS settings: %v; want refused, Unavailable, saying %q", err, tc.want)
		}
	}
}

// A refusal whose code is OK (a stranger at a peer's address) is a
// failure with Unavailable, never a lane.
func TestLaneRefusalIsNeverOK(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write(append([]byte(laneMagic), laneRefused, 0, 0, 0))
		_, _ = io.Copy(io.Discard, c)
	}()
	a := grpcNet(t, "n1", nil)
	s, err := a.dialLane(context.Background(), "n2", ln.Addr().String())
	if s != nil || status.Code(err) != codes.Unavailable {
		t.Fatalf("refusal with code OK: lane %v, %v; want no lane, Unavailable", s != nil, err)
	}
}

// TestLaneFramesRoundTrip sends frames over a connStream and reads them
// back: every frame either arrives as it was sent or is refused by Send,
// never garbled (vtprotobuf encodes back to front under the size it
// computed; a size off by one, as the pinned generator's is for a Raft
// body without its message, must not reach the wire).
func TestLaneFramesRoundTrip(t *testing.T) {
	frames := []struct {
		name string
		f    *pb.Frame
	}{
		{"call", &pb.Frame{Messages: []*pb.Message{{Id: 1, TimeoutUs: 5, Body: &pb.Message_Call{Call: &pb.CallRequest{Method: "forward.publish", Payload: []byte("abc")}}}}}},
		{"answers", &pb.Frame{Messages: []*pb.Message{
			{Id: 2, Body: &pb.Message_CallResp{CallResp: &pb.CallResponse{Payload: []byte{1, 2}}}},
			{Id: 3, Body: &pb.Message_Error{Error: &pb.Status{Code: 5, Message: "no queue"}}},
			{Id: 4, Body: &pb.Message_Ping{Ping: &pb.Ping{}}},
		}}},
		{"empty call", &pb.Frame{Messages: []*pb.Message{{Id: 5, Body: &pb.Message_Call{}}}}},
		{"raft body without its message", &pb.Frame{Messages: []*pb.Message{{Id: 6, Group: "g", Body: &pb.Message_AppendEntries{}}}}},
		{"no messages", &pb.Frame{}},
	}
	for _, tc := range frames {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			out := newConnStream(a, bufio.NewReader(a), 1<<20)
			in := newConnStream(b, bufio.NewReader(b), 1<<20)
			sent := make(chan error, 1)
			go func() {
				err := out.Send(tc.f)
				sent <- err
				if err != nil {
					a.Close() // nothing was written: end the reader's wait
				}
			}()
			got, rerr := in.Recv()
			if err := <-sent; err != nil {
				t.Logf("refused: %v", err)
				return
			}
			if rerr != nil {
				t.Fatalf("Recv: %v", rerr)
			}
			if !proto.Equal(got, tc.f) {
				t.Fatalf("received %v, sent %v", got, tc.f)
			}
		})
	}
}

// An Immediate Send that waits for the call lane to open (the peer's
// connection being made) waits no longer than its context: a peer that
// holds every byte would otherwise hold it for the opening's bound.
func TestImmediateSendWaitingForTheLaneEndsWithItsContext(t *testing.T) {
	a, b := grpcNet(t, "n1", nil), grpcNet(t, "n2", nil)
	b.HandleInline("echo", echo)
	p := newProxy(t, b.Addr().String())
	p.freeze(true)
	must(t, a.SetAddress("n2", p.addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	got := make(chan error, 1)
	must(t, a.Send(Immediate(ctx), "n2", "echo", []byte("x"), func(_ []byte, err error) { got <- err }))
	select {
	case err := <-got:
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("Send ended with %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("Send ended after %v, its context after 300ms", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Send still waits for the lane 5s on, its context ended after 300ms")
	}
	// Once the peer answers again, Sends go through.
	p.freeze(false)
	eventually.True(t, 15*time.Second, "a Send through once n2 answers", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res := make(chan error, 1)
		if err := a.Send(Immediate(ctx), "n2", "echo", []byte("y"), func(_ []byte, err error) { res <- err }); err != nil {
			return false
		}
		return <-res == nil
	})
}
