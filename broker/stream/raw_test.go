package stream_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/server"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// rawConn speaks the protocol frame by frame with the codec, for what the
// official client cannot send (or hides).
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, n *brokertest.Node) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", n.StreamAddr())
	must(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) send(c proto.Command) {
	r.t.Helper()
	r.write(proto.Encode(nil, c))
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// recv returns the next command other than a heartbeat.
func (r *rawConn) recv() proto.Command {
	r.t.Helper()
	c, err := r.tryRecv()
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return c
}

func (r *rawConn) tryRecv() (proto.Command, error) {
	_ = r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		body, err := proto.ReadFrame(r.br, nil, 0)
		if err != nil {
			return nil, err
		}
		c, err := proto.Decode(body)
		if err != nil {
			return nil, err
		}
		if _, ok := c.(*proto.Heartbeat); !ok {
			return c, nil
		}
	}
}

// open runs the handshake as guest on vhost "/".
func (r *rawConn) open() {
	r.t.Helper()
	tune := r.authenticate()
	r.send(&proto.Tune{Response: true, FrameMax: tune.FrameMax, Heartbeat: 0})
	r.openVhost()
}

// authenticate exchanges peer properties, logs in as guest and returns
// the server's tune.
func (r *rawConn) authenticate() *proto.Tune {
	r.t.Helper()
	r.send(&proto.PeerProperties{CorrelationID: 1, Properties: map[string]string{"product": "raw"}})
	if pp, ok := r.recv().(*proto.PeerPropertiesResponse); !ok || pp.Code != proto.CodeOK {
		r.t.Fatalf("peer properties: %#v", pp)
	}
	r.send(&proto.SaslHandshake{CorrelationID: 2})
	r.recv()
	r.send(&proto.SaslAuthenticate{CorrelationID: 3, Mechanism: "PLAIN", Data: []byte("\x00guest\x00guest")})
	if resp := r.recv().(*proto.Response); resp.Code != proto.CodeOK {
		r.t.Fatalf("authenticate: %d", resp.Code)
	}
	tune, ok := r.recv().(*proto.Tune)
	if !ok {
		r.t.Fatalf("no tune from the server")
	}
	return tune
}

// openVhost opens vhost "/" after the tune.
func (r *rawConn) openVhost() {
	r.t.Helper()
	r.send(&proto.Open{CorrelationID: 4, Vhost: "/"})
	c, err := r.tryRecv()
	if resp, ok := c.(*proto.OpenResponse); err != nil || !ok || resp.Code != proto.CodeOK {
		r.t.Fatalf("open: %#v, %v", c, err)
	}
}

// call sends a request and returns the response.
func (r *rawConn) call(c proto.Command) proto.Command {
	r.t.Helper()
	r.send(c)
	return r.recv()
}

func code(c proto.Command) uint16 {
	switch m := c.(type) {
	case *proto.Response:
		return m.Code
	case *proto.QueryOffsetResponse:
		return m.Code
	case *proto.QueryPublisherSequenceResponse:
		return m.Code
	case *proto.StreamStatsResponse:
		return m.Code
	case *proto.StreamsResponse:
		return m.Code
	case *proto.CreditResponse:
		return m.Code
	}
	return 0
}

// TestResponseCodes checks the codes the official client hides or never
// provokes.
func TestResponseCodes(t *testing.T) {
	n := brokertest.Start(t)
	r := dialRaw(t, n)
	r.open()
	cases := []struct {
		name string
		req  proto.Command
		want uint16
	}{
		{"create", &proto.CreateStream{CorrelationID: 10, Stream: "s"}, proto.CodeOK},
		{"create again", &proto.CreateStream{CorrelationID: 11, Stream: "s"}, proto.CodeStreamAlreadyExists},
		{"create bad argument", &proto.CreateStream{CorrelationID: 12, Stream: "t", Arguments: map[string]string{"max-age": "soon"}}, proto.CodePreconditionFailed},
		{"create unknown argument", &proto.CreateStream{CorrelationID: 13, Stream: "t", Arguments: map[string]string{"x": "1"}}, proto.CodePreconditionFailed},
		{"delete missing", &proto.DeleteStream{CorrelationID: 14, Stream: "nope"}, proto.CodeStreamDoesNotExist},
		{"declare publisher missing stream", &proto.DeclarePublisher{CorrelationID: 15, PublisherID: 1, Stream: "nope"}, proto.CodeStreamDoesNotExist},
		{"declare publisher", &proto.DeclarePublisher{CorrelationID: 16, PublisherID: 1, Reference: "r", Stream: "s"}, proto.CodeOK},
		{"declare publisher id again", &proto.DeclarePublisher{CorrelationID: 17, PublisherID: 1, Stream: "s"}, proto.CodePreconditionFailed},
		{"delete unknown publisher", &proto.DeletePublisher{CorrelationID: 18, PublisherID: 9}, proto.CodePublisherDoesNotExist},
		{"subscribe missing stream", &proto.Subscribe{CorrelationID: 19, SubscriptionID: 1, Stream: "nope", Offset: proto.OffsetSpec{Type: proto.OffsetFirst}, Credit: 1}, proto.CodeStreamDoesNotExist},
		{"subscribe", &proto.Subscribe{CorrelationID: 20, SubscriptionID: 1, Stream: "s", Offset: proto.OffsetSpec{Type: proto.OffsetNext}, Credit: 1}, proto.CodeOK},
		{"subscribe id again", &proto.Subscribe{CorrelationID: 21, SubscriptionID: 1, Stream: "s", Offset: proto.OffsetSpec{Type: proto.OffsetNext}, Credit: 1}, proto.CodeSubscriptionIDAlreadyExists},
		{"unsubscribe unknown", &proto.Unsubscribe{CorrelationID: 22, SubscriptionID: 7}, proto.CodeSubscriptionIDDoesNotExist},
		{"query offset none", &proto.QueryOffset{CorrelationID: 23, Reference: "c", Stream: "s"}, proto.CodeNoOffset},
		{"query offset missing stream", &proto.QueryOffset{CorrelationID: 24, Reference: "c", Stream: "nope"}, proto.CodeStreamDoesNotExist},
		{"query sequence missing stream", &proto.QueryPublisherSequence{CorrelationID: 25, Reference: "r", Stream: "nope"}, proto.CodeStreamDoesNotExist},
		{"stats missing stream", &proto.StreamStats{CorrelationID: 26, Stream: "nope"}, proto.CodeStreamDoesNotExist},
		{"partitions missing", &proto.Partitions{CorrelationID: 27, SuperStream: "nope"}, proto.CodeStreamDoesNotExist},
		{"route missing", &proto.Route{CorrelationID: 28, RoutingKey: "k", SuperStream: "nope"}, proto.CodeStreamDoesNotExist},
		{"delete super stream missing", &proto.DeleteSuperStream{CorrelationID: 29, Name: "nope"}, proto.CodeStreamDoesNotExist},
		{"super stream with mismatched keys", &proto.CreateSuperStream{CorrelationID: 30, Name: "x", Partitions: []string{"x-0"}}, proto.CodePreconditionFailed},
	}
	for _, tc := range cases {
		if got := code(r.call(tc.req)); got != tc.want {
			t.Errorf("%s: code %d (%s), want %d (%s)", tc.name, got, proto.CodeText(got), tc.want, proto.CodeText(tc.want))
		}
	}

	// Credit for an unknown subscription is answered; a known one is not.
	r.send(&proto.Credit{SubscriptionID: 1, Credit: 1})
	if got := code(r.call(&proto.Credit{SubscriptionID: 5, Credit: 1})); got != proto.CodeSubscriptionIDDoesNotExist {
		t.Errorf("credit unknown subscription: %d", got)
	}
	// Publishing with an undeclared publisher id gets publish errors.
	r.send(&proto.Publish{Version: 1, PublisherID: 4, Messages: []proto.PublishedMessage{{PublishingID: 7, Entry: proto.SimpleEntry([]byte("x")), Records: 1}}})
	pe, ok := r.recv().(*proto.PublishError)
	if !ok || len(pe.Errors) != 1 || pe.Errors[0].PublishingID != 7 || pe.Errors[0].Code != proto.CodePublisherDoesNotExist {
		t.Fatalf("publish error: %#v", pe)
	}
	// An unknown command with a correlation id gets unknown frame, and the
	// connection stays usable.
	r.write([]byte{0, 0, 0, 8, 0, 99, 0, 1, 0, 0, 0, 42})
	body, err := proto.ReadFrame(r.br, nil, 0)
	must(t, err)
	if want := []byte{0x80, 99, 0, 1, 0, 0, 0, 42, 0, byte(proto.CodeUnknownFrame)}; string(body) != string(want) {
		t.Fatalf("unknown command answered %x, want %x", body, want)
	}
	// Publish v2 with a filter value, confirmed; delivered (v2 with the
	// committed chunk id once versions are exchanged) to the subscription.
	vr := r.call(&proto.ExchangeVersions{CorrelationID: 31, Commands: []proto.CommandVersion{{Key: proto.KeyDeliver, Min: 1, Max: 2}, {Key: proto.KeyPublish, Min: 1, Max: 2}}}).(*proto.ExchangeVersionsResponse)
	if len(vr.Commands) == 0 {
		t.Fatal("no command versions")
	}
	r.send(&proto.Publish{Version: 2, PublisherID: 1, Messages: []proto.PublishedMessage{{PublishingID: 1, Filter: "eu", Entry: proto.SimpleEntry([]byte("hello")), Records: 1}}})
	var confirmed, delivered bool
	for !confirmed || !delivered {
		switch m := r.recv().(type) {
		case *proto.PublishConfirm:
			if m.PublisherID != 1 || len(m.PublishingIDs) != 1 || m.PublishingIDs[0] != 1 {
				t.Fatalf("confirm %#v", m)
			}
			confirmed = true
		case *proto.Deliver:
			if m.Version != 2 || m.SubscriptionID != 1 || m.CommittedChunkID != 0 {
				t.Fatalf("deliver v%d sub %d committed %d", m.Version, m.SubscriptionID, m.CommittedChunkID)
			}
			if string(m.Chunk[proto.ChunkHeaderSize+4:]) != "hello" {
				t.Fatalf("chunk data %q", m.Chunk[proto.ChunkHeaderSize:])
			}
			delivered = true
		default:
			t.Fatalf("unexpected %#v", m)
		}
	}
	if resp := r.call(&proto.QueryPublisherSequence{CorrelationID: 32, Reference: "r", Stream: "s"}).(*proto.QueryPublisherSequenceResponse); resp.Sequence != 1 {
		t.Fatalf("sequence %d", resp.Sequence)
	}
	// Closing: the server answers and closes.
	if got := code(r.call(&proto.Close{CorrelationID: 33, Code: proto.CodeOK, Reason: "bye"})); got != proto.CodeOK {
		t.Fatalf("close: %d", got)
	}
	if _, err := r.tryRecv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after close: %v", err)
	}
}

// TestMalformedFrameClosesOnlyItsConnection: garbage gets a close with
// the protocol's code and ends that connection only.
func TestMalformedFrameClosesOnlyItsConnection(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("ok", nil))
	cases := []struct {
		name  string
		frame []byte
		want  uint16
	}{
		{"short frame", []byte{0, 0, 0, 2, 0, 1}, proto.CodeUnknownFrame},
		{"truncated fields", []byte{0, 0, 0, 6, 0, byte(proto.KeyCreateStream), 0, 1, 0, 0}, proto.CodeUnknownFrame},
		{"string overruns frame", []byte{0, 0, 0, 12, 0, byte(proto.KeyDeleteStream), 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 'a', 'b'}, proto.CodeUnknownFrame},
		{"publish entry overruns", []byte{0, 0, 0, 18, 0, byte(proto.KeyPublish), 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0}, proto.CodeUnknownFrame},
		{"frame too large", []byte{0x7f, 0, 0, 0, 0, 1}, proto.CodeFrameTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, n)
			r.open()
			r.write(tc.frame)
			cl, ok := r.recv().(*proto.Close)
			if !ok || cl.Code != tc.want {
				t.Fatalf("got %#v, want close with code %d", cl, tc.want)
			}
			if _, err := r.tryRecv(); !errors.Is(err, io.EOF) {
				t.Fatalf("connection not closed: %v", err)
			}
			// Other connections are untouched.
			publish(t, e, "ok", tc.name, 10, nil)
		})
	}
	// Garbage before the handshake too.
	r := dialRaw(t, n)
	r.write([]byte("GET / HTTP/1.1\r\n\r\n"))
	for {
		c, err := r.tryRecv()
		if errors.Is(err, io.EOF) {
			break
		}
		if cl, ok := c.(*proto.Close); err != nil || !ok || cl.Code != proto.CodeFrameTooLarge {
			t.Fatalf("HTTP request answered with %#v, %v", c, err)
		}
	}
}

// TestHeartbeats: with a negotiated heartbeat the server sends heartbeats
// on an idle connection.
func TestHeartbeats(t *testing.T) {
	n := brokertest.Start(t)
	r := dialRaw(t, n)
	r.send(&proto.SaslHandshake{CorrelationID: 1})
	r.recv()
	r.send(&proto.SaslAuthenticate{CorrelationID: 2, Mechanism: "PLAIN", Data: []byte("\x00guest\x00guest")})
	r.recv()
	tune := r.recv().(*proto.Tune)
	if tune.Heartbeat != 60 || tune.FrameMax != 1<<20 {
		t.Fatalf("server tune %+v", tune)
	}
	r.send(&proto.Tune{Response: true, FrameMax: 1 << 20, Heartbeat: 1})
	r.send(&proto.Open{CorrelationID: 3, Vhost: "/"})
	r.recv()
	_ = r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := proto.ReadFrame(r.br, nil, 0)
	must(t, err)
	if c, err := proto.Decode(body); err != nil {
		t.Fatal(err)
	} else if _, ok := c.(*proto.Heartbeat); !ok {
		t.Fatalf("idle connection got %#v, want a heartbeat", c)
	}
}

// TestFiltering: chunks whose bloom filter cannot hold a wanted filter
// value are not delivered to a filtering subscription.
func TestFiltering(t *testing.T) {
	n := brokertest.Start(t)
	r := dialRaw(t, n)
	r.open()
	if code(r.call(&proto.CreateStream{CorrelationID: 10, Stream: "f"})) != proto.CodeOK ||
		code(r.call(&proto.DeclarePublisher{CorrelationID: 11, PublisherID: 1, Stream: "f"})) != proto.CodeOK {
		t.Fatal("setup")
	}
	// Three chunks: eu, us, and unfiltered; each confirmed before the next.
	for i, filter := range []string{"eu", "us", ""} {
		r.send(&proto.Publish{Version: 2, PublisherID: 1, Messages: []proto.PublishedMessage{
			{PublishingID: uint64(i + 1), Filter: filter, Entry: proto.SimpleEntry([]byte("m-" + filter)), Records: 1}}})
		if _, ok := r.recv().(*proto.PublishConfirm); !ok {
			t.Fatal("no confirm")
		}
	}
	cases := []struct {
		props map[string]string
		want  []string
	}{
		{map[string]string{"filter.0": "eu"}, []string{"m-eu"}},
		{map[string]string{"filter.0": "us", "filter.1": "eu"}, []string{"m-eu", "m-us"}},
		{map[string]string{"filter.0": "us", "match-unfiltered": "true"}, []string{"m-us", "m-"}},
		{nil, []string{"m-eu", "m-us", "m-"}},
	}
	for i, tc := range cases {
		id := uint8(i + 2)
		r.send(&proto.Subscribe{CorrelationID: uint32(20 + i), SubscriptionID: id, Stream: "f", Offset: proto.OffsetSpec{Type: proto.OffsetFirst}, Credit: 10, Properties: tc.props})
		var got []string
		_ = r.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		for {
			body, err := proto.ReadFrame(r.br, nil, 0)
			if err != nil {
				break
			}
			c, err := proto.Decode(body)
			must(t, err)
			if d, ok := c.(*proto.Deliver); ok && d.SubscriptionID == id {
				// Header and data: the bloom filter stays on the server.
				got = append(got, string(d.Chunk[proto.ChunkHeaderSize+4:]))
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("filter %v: got %v, want %v", tc.props, got, tc.want)
		}
	}
}

// TestAdvertisedAddress: open and metadata give the configured advertised
// host and port (the listener's address when none is configured).
func TestAdvertisedAddress(t *testing.T) {
	for _, tc := range []struct {
		name       string
		host       string
		port       int
		wantHost   string
		listenPort bool
	}{
		{"listener", "", 0, "127.0.0.1", true},
		{"configured", "stream.example.com", 5552, "stream.example.com", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := brokertest.Start(t, func(c *config.Config) {
				c.Stream.AdvertisedHost, c.Stream.AdvertisedPort = tc.host, tc.port
			})
			wantPort := tc.port
			if tc.listenPort {
				wantPort = n.Addr(server.ListenerStream).(*net.TCPAddr).Port
			}
			r := dialRaw(t, n)
			r.send(&proto.SaslHandshake{CorrelationID: 1})
			r.recv()
			r.send(&proto.SaslAuthenticate{CorrelationID: 2, Mechanism: "PLAIN", Data: []byte("\x00guest\x00guest")})
			r.recv()
			r.recv()
			r.send(&proto.Tune{Response: true, FrameMax: 1 << 20})
			open := r.call(&proto.Open{CorrelationID: 3, Vhost: "/"}).(*proto.OpenResponse)
			if open.Properties["advertised_host"] != tc.wantHost || open.Properties["advertised_port"] != fmt.Sprint(wantPort) {
				t.Fatalf("open properties %v", open.Properties)
			}
			r.call(&proto.CreateStream{CorrelationID: 4, Stream: "s"})
			md := r.call(&proto.Metadata{CorrelationID: 5, Streams: []string{"s", "missing"}}).(*proto.MetadataResponse)
			if len(md.Brokers) != 1 || md.Brokers[0].Host != tc.wantHost || md.Brokers[0].Port != uint32(wantPort) {
				t.Fatalf("brokers %+v", md.Brokers)
			}
			if len(md.Streams) != 2 || md.Streams[0].Code != proto.CodeOK || md.Streams[0].Leader != md.Brokers[0].Reference ||
				md.Streams[1].Code != proto.CodeStreamDoesNotExist {
				t.Fatalf("streams %+v", md.Streams)
			}
		})
	}
}

// TestConfirmWithPartialFrameBuffered: a publish is written and confirmed
// even when the next frame has only partly arrived.
func TestConfirmWithPartialFrameBuffered(t *testing.T) {
	n := brokertest.Start(t)
	r := dialRaw(t, n)
	r.open()
	r.call(&proto.CreateStream{CorrelationID: 10, Stream: "p"})
	r.call(&proto.DeclarePublisher{CorrelationID: 11, PublisherID: 1, Stream: "p"})
	frame := proto.Encode(nil, &proto.Publish{Version: 1, PublisherID: 1, Messages: []proto.PublishedMessage{{PublishingID: 1, Entry: proto.SimpleEntry([]byte("x")), Records: 1}}})
	next := proto.Encode(nil, &proto.Heartbeat{})
	r.write(append(frame, next[:6]...))
	if c, ok := r.recv().(*proto.PublishConfirm); !ok || len(c.PublishingIDs) != 1 {
		t.Fatalf("got %#v, want a confirm", c)
	}
	r.write(next[6:])
}

// TestUnreadConfirmsStopReading: a publisher that never reads its confirms
// is no longer read once its output is full, instead of the server
// queueing confirms without bound.
func TestUnreadConfirmsStopReading(t *testing.T) {
	n := brokertest.Start(t)
	r := dialRaw(t, n)
	_ = r.nc.(*net.TCPConn).SetReadBuffer(4096)
	r.open()
	r.call(&proto.CreateStream{CorrelationID: 10, Stream: "p"})
	r.call(&proto.DeclarePublisher{CorrelationID: 11, PublisherID: 1, Stream: "p"})
	msgs := make([]proto.PublishedMessage, 1000)
	for i := range msgs {
		msgs[i] = proto.PublishedMessage{Entry: proto.SimpleEntry(nil), Records: 1}
	}
	// 8 MiB of confirms is about a million messages; write up to 8 million.
	deadline := time.Now().Add(60 * time.Second)
	for id := uint64(1); id < 8_000_000; id += 1000 {
		for i := range msgs {
			msgs[i].PublishingID = id + uint64(i)
		}
		_ = r.nc.SetWriteDeadline(time.Now().Add(3 * time.Second))
		if _, err := r.nc.Write(proto.Encode(nil, &proto.Publish{Version: 1, PublisherID: 1, Messages: msgs})); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return // the server stopped reading us
			}
			t.Fatalf("write: %v", err)
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Fatal("the server kept reading a publisher that reads no confirms")
}

// TestAlarmBlocksPublishers: under a resource alarm a publish is not taken
// (nor confirmed) until the alarm clears.
func TestAlarmBlocksPublishers(t *testing.T) {
	n := brokertest.Start(t)
	r := dialRaw(t, n)
	r.open()
	r.call(&proto.CreateStream{CorrelationID: 10, Stream: "a"})
	r.call(&proto.DeclarePublisher{CorrelationID: 11, PublisherID: 1, Stream: "a"})
	n.Stream.SetBlocked("memory alarm")
	r.send(&proto.Publish{Version: 1, PublisherID: 1, Messages: []proto.PublishedMessage{{PublishingID: 1, Entry: proto.SimpleEntry([]byte("x")), Records: 1}}})
	_ = r.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := proto.ReadFrame(r.br, nil, 0); err == nil {
		t.Fatal("got a frame while publishers are blocked")
	}
	n.Stream.SetBlocked("")
	if c, ok := r.recv().(*proto.PublishConfirm); !ok || len(c.PublishingIDs) != 1 {
		t.Fatalf("after the alarm: %#v", c)
	}
}
