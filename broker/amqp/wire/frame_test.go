package wire

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/iotest"
	"time"
)

func TestAppendMethodFrameGolden(t *testing.T) {
	got := AppendMethodFrame([]byte("prefix"), 0x0102, &BasicAck{DeliveryTag: 5, Multiple: true})
	want := append([]byte("prefix"), FrameMethod, 1, 2, 0, 0, 0, 13, 0, 60, 0, 80, 0, 0, 0, 0, 0, 0, 0, 5, 1, FrameEnd)
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
	if got := AppendHeartbeat(nil); !bytes.Equal(got, []byte{8, 0, 0, 0, 0, 0, 0, 0xce}) {
		t.Fatalf("heartbeat % x", got)
	}
}

func TestAppendBodyFrames(t *testing.T) {
	body := make([]byte, 10000)
	for i := range body {
		body[i] = byte(i)
	}
	tests := []struct {
		name     string
		body     []byte
		frameMax uint32
		sizes    []int
	}{
		{"empty", nil, 4096, nil},
		{"fits", body[:100], 4096, []int{100}},
		{"exactly one frame", body[:4088], 4096, []int{4088}},
		{"one byte over", body[:4089], 4096, []int{4088, 1}},
		{"split", body, 4096, []int{4088, 4088, 1824}},
		{"no limit", body, 0, []int{10000}},
		{"tiny frame max", body[:5], 10, []int{2, 2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := AppendBodyFrames(nil, 3, tt.body, tt.frameMax)
			r := NewReader(bytes.NewReader(out), 0)
			r.SetMaxFrameSize(tt.frameMax)
			var joined []byte
			var sizes []int
			for {
				f, err := r.ReadFrame()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("ReadFrame: %v", err)
				}
				if f.Type != FrameBody || f.Channel != 3 {
					t.Fatalf("frame type %d channel %d", f.Type, f.Channel)
				}
				sizes = append(sizes, len(f.Payload))
				joined = append(joined, f.Payload...)
			}
			if !equalInts(sizes, tt.sizes) {
				t.Fatalf("frame payload sizes %v, want %v", sizes, tt.sizes)
			}
			if !bytes.Equal(joined, tt.body) {
				t.Fatalf("reassembled body differs")
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// message appends a full publish: method, header and body frames.
func message(b []byte, channel uint16, body []byte, frameMax uint32) []byte {
	b = AppendMethodFrame(b, channel, &BasicPublish{Exchange: "amq.direct", RoutingKey: "key", Mandatory: true})
	props := (&Properties{ContentType: "text/plain", DeliveryMode: 2}).Append(nil)
	b = AppendHeaderFrame(b, channel, ClassBasic, uint64(len(body)), props)
	return AppendBodyFrames(b, channel, body, frameMax)
}

func readMessage(t *testing.T, r *Reader) []byte {
	t.Helper()
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatalf("method frame: %v", err)
	}
	m, err := DecodeMethod(f.Payload)
	if err != nil {
		t.Fatalf("DecodeMethod: %v", err)
	}
	if p, ok := m.(*BasicPublish); !ok || p.RoutingKey != "key" || !p.Mandatory {
		t.Fatalf("method %#v", m)
	}
	f, err = r.ReadFrame()
	if err != nil || f.Type != FrameHeader {
		t.Fatalf("header frame: %v %v", f.Type, err)
	}
	h, err := DecodeContentHeader(f.Payload)
	if err != nil {
		t.Fatalf("DecodeContentHeader: %v", err)
	}
	if mode, err := PropertiesDeliveryMode(h.Properties); mode != 2 || err != nil {
		t.Fatalf("delivery mode %d %v", mode, err)
	}
	var body []byte
	for uint64(len(body)) < h.BodySize {
		f, err = r.ReadFrame()
		if err != nil || f.Type != FrameBody {
			t.Fatalf("body frame: %v %v", f.Type, err)
		}
		body = append(body, f.Payload...)
	}
	return body
}

// TestReaderOverSocket streams messages over a real TCP connection, one
// byte per write on the first message so frames arrive in pieces, then
// larger than the reader's buffer.
func TestReaderOverSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	small := []byte("hello")
	big := bytes.Repeat([]byte("0123456789"), 30000) // 300 kB, larger than the buffer
	errc := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		out := []byte(ProtocolHeader)
		out = message(out, 1, small, 131072)
		for i := range out { // dribble
			if _, err := c.Write(out[i : i+1]); err != nil {
				errc <- err
				return
			}
		}
		out = message(nil, 2, big, 131072)
		out = message(out, 3, big, 0) // a single 300 kB frame
		out = AppendHeartbeat(out)
		_, err = c.Write(out)
		errc <- err
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := NewReader(c, 4096)
	hdr, err := r.ReadProtocolHeader()
	if err != nil || string(hdr[:]) != ProtocolHeader {
		t.Fatalf("ReadProtocolHeader = %q, %v", hdr, err)
	}
	if got := readMessage(t, r); !bytes.Equal(got, small) {
		t.Fatalf("small body %q", got)
	}
	if got := readMessage(t, r); !bytes.Equal(got, big) {
		t.Fatalf("big body differs (%d bytes)", len(got))
	}
	if got := readMessage(t, r); !bytes.Equal(got, big) {
		t.Fatalf("single-frame big body differs (%d bytes)", len(got))
	}
	if f, err := r.ReadFrame(); err != nil || f.Type != FrameHeartbeat || len(f.Payload) != 0 {
		t.Fatalf("heartbeat: %+v %v", f, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after close: %v, want io.EOF", err)
	}
}

func TestReaderErrors(t *testing.T) {
	good := AppendMethodFrame(nil, 1, &ChannelOpen{})
	badEnd := bytes.Clone(good)
	badEnd[len(badEnd)-1] = 0
	badType := bytes.Clone(good)
	badType[0] = 7
	huge := []byte{FrameBody, 0, 1, 0xff, 0xff, 0xff, 0xf0}
	tests := []struct {
		name     string
		in       []byte
		maxFrame uint32
		want     error
	}{
		{"bad frame end", badEnd, 0, ErrBadFrameEnd},
		{"bad frame type", badType, 0, ErrBadFrameType},
		{"too large", AppendBodyFrames(nil, 1, make([]byte, 4089), 0), 4096, ErrFrameTooLarge},
		{"hostile size", huge, 131072, ErrFrameTooLarge},
		{"truncated header", good[:5], 0, io.ErrUnexpectedEOF},
		{"truncated payload", good[:len(good)-1], 0, io.ErrUnexpectedEOF},
		{"hostile size without limit", huge, 0, io.ErrUnexpectedEOF},
		{"empty", nil, 0, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(iotest.HalfReader(bytes.NewReader(tt.in)), 4096)
			r.SetMaxFrameSize(tt.maxFrame)
			if f, err := r.ReadFrame(); !errors.Is(err, tt.want) {
				t.Fatalf("ReadFrame = %+v, %v; want %v", f, err, tt.want)
			}
		})
	}
	// The exact frame-max is accepted.
	r := NewReader(bytes.NewReader(AppendBodyFrames(nil, 1, make([]byte, 4088), 0)), 0)
	r.SetMaxFrameSize(4096)
	if _, err := r.ReadFrame(); err != nil {
		t.Fatalf("frame of exactly frame-max: %v", err)
	}
	// A short protocol header is an error, not a zero header.
	if _, err := NewReader(bytes.NewReader([]byte("AMQP")), 0).ReadProtocolHeader(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short protocol header: %v", err)
	}
}

// TestReaderRetryAfterTimeout checks that a read deadline expiring in the
// middle of a frame loses nothing: the next ReadFrame completes the frame.
func TestReaderRetryAfterTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })

	frame := AppendMethodFrame(nil, 9, &BasicPublish{RoutingKey: "rk"})
	if _, err := client.Write(frame[:10]); err != nil {
		t.Fatal(err)
	}
	r := NewReader(server, 0)
	_ = server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.ReadFrame(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadFrame with half a frame = %v, want deadline exceeded", err)
	}
	if _, err := client.Write(frame[10:]); err != nil {
		t.Fatal(err)
	}
	_ = server.SetReadDeadline(time.Time{})
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatalf("ReadFrame after timeout: %v", err)
	}
	m, err := DecodeMethod(f.Payload)
	if err != nil || f.Channel != 9 || m.(*BasicPublish).RoutingKey != "rk" {
		t.Fatalf("frame after timeout: channel %d %#v %v", f.Channel, m, err)
	}
}

func TestReaderBuffered(t *testing.T) {
	first := AppendMethodFrame(nil, 1, &BasicAck{DeliveryTag: 1})
	second := AppendHeartbeat(nil)
	r := NewReader(bytes.NewReader(append(bytes.Clone(first), second...)), 0)
	if n := r.Buffered(); n != 0 {
		t.Fatalf("Buffered() before reading = %d", n)
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if n := r.Buffered(); n != len(second) {
		t.Fatalf("Buffered() = %d, want %d", n, len(second))
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if n := r.Buffered(); n != 0 {
		t.Fatalf("Buffered() at end = %d", n)
	}
}

// NextMethod looks at what is buffered behind the frame just read, and
// only at a method frame received whole.
func TestReaderNextMethod(t *testing.T) {
	ack := AppendMethodFrame(nil, 1, &BasicAck{DeliveryTag: 7})
	tests := []struct {
		name   string
		behind []byte // after a first heartbeat frame
		class  uint16
		method uint16
		ok     bool
	}{
		{"whole ack", ack, ClassBasic, 80, true},
		{"ack without its frame end", ack[:len(ack)-1], 0, 0, false},
		{"start of an ack", ack[:9], 0, 0, false},
		{"header frame", AppendHeaderFrame(nil, 1, ClassBasic, 0, nil), 0, 0, false},
		{"nothing", nil, 0, 0, false},
		{"method frame too short for ids", []byte{FrameMethod, 0, 1, 0, 0, 0, 2, 0, 60, FrameEnd}, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append(AppendHeartbeat(nil), tt.behind...)
			r := NewReader(bytes.NewReader(in), 0)
			if _, err := r.ReadFrame(); err != nil {
				t.Fatal(err)
			}
			class, method, ok := r.NextMethod()
			if class != tt.class || method != tt.method || ok != tt.ok {
				t.Fatalf("NextMethod() = %d, %d, %v; want %d, %d, %v", class, method, ok, tt.class, tt.method, tt.ok)
			}
			if r.Buffered() != len(tt.behind) {
				t.Fatalf("NextMethod consumed input: %d buffered, want %d", r.Buffered(), len(tt.behind))
			}
		})
	}
}

// loopReader serves the same bytes forever.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.data[l.off:])
		n += c
		l.off = (l.off + c) % len(l.data)
	}
	return n, nil
}

func TestReaderNoAllocs(t *testing.T) {
	r := NewReader(&loopReader{data: message(nil, 1, make([]byte, 1000), 131072)}, 64<<10)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ReadFrame allocates %.1f times per frame", allocs)
	}
}
