package transport

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"syscall"
	"time"

	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"github.com/warrenmq/warren/broker/sockio"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The call lane: node-level calls (Call, Send: forwarded client traffic,
// metadata writes to the leader) go to a peer over a TCP connection of
// their own, framed without HTTP/2, on the port the gRPC server listens on
// (mux.go tells the two apart by their first bytes). The connection carries
// the same Frames as a gRPC stream, each a 4-byte big-endian length and the
// Frame's protobuf encoding, so the stream's link machinery runs unchanged
// on it; what it saves is gRPC's hand-offs: a frame is written by the
// link's writer itself (no HTTP/2 writer goroutine) and read and dispatched
// by the goroutine that reads the socket (no HTTP/2 reader handing it to
// the stream's). On two loaded cores each hand-off is a wait for a CPU, and
// forwarded publishes wait for their round trip.
//
// Opening: the dialler sends laneMagic, then (with Config.TLS) does the
// TLS handshake as a client over the same connection, then a hello: its
// node name and the join secret, each a 2-byte length and the bytes. The
// listener answers the magic and laneOK, or the magic, laneRefused, a gRPC
// code, a 2-byte length and a reason, and closes. A dialler whose TLS
// setting differs (its first byte after the magic is, or is not, a TLS
// record's when this node's is not, or is) is refused the same way,
// before any TLS. A peer that does not know lanes (an older node) answers
// something else: its HTTP/2 server's SETTINGS frame (without TLS), or
// it closes the connection during the TLS handshake. The dialler then
// sends its calls on the gRPC data stream while that stream stands
// (peerConn.callLink).

// laneMagic opens a call lane; no HTTP/2 client preface or TLS record
// starts with it.
const laneMagic = "WRNLANE1"

// The answer's byte after the magic.
const (
	laneOK      byte = 0
	laneRefused byte = 1
)

// laneHandshakeTime bounds a lane's opening, both ends.
const laneHandshakeTime = 10 * time.Second

// maxHelloField bounds the node name and the secret of a hello.
const maxHelloField = 4096

// refusedError is a lane the listener refused: err is the status (its
// code and reason) the dialler's calls fail with.
type refusedError struct{ err error }

func (e refusedError) Error() string { return e.err.Error() }

// GRPCStatus gives the refusal's code to status.Code and status.Convert.
func (e refusedError) GRPCStatus() *status.Status { return status.Convert(e.err) }

// errNoLane marks a peer that does not know lanes (an older node).
var errNoLane = errors.New("peer does not open call lanes")

// connStream is a frameStream over one lane connection: Send (and
// trySend) is called by one goroutine at a time (the holder of its link's
// write turn), Recv by another (the reader).
//
// Over plain TCP, reads and writes are sockio's raw non-blocking system
// calls (the runtime's monitor thread is not woken for each, and the P is
// not handed off); a read waits for data in the network poller, and a
// write the socket does not take whole finishes with a blocking Write.
// Over TLS, they are the tls.Conn's.
type connStream struct {
	c    net.Conn
	r    *bufio.Reader
	sock *sockio.Socket // nil over TLS
	max  int            // bound on one frame's encoding
	out  []byte         // Send's buffer, reused
	in   []byte         // Recv's buffer, reused (Unmarshal copies what it keeps)
}

// newConnStream makes the frameStream of a lane whose opening is done: r
// holds nothing the opening did not read (its source becomes the raw
// socket where there is one).
func newConnStream(c net.Conn, r *bufio.Reader, max int) *connStream {
	s := &connStream{c: c, r: r, max: max}
	if tc := plainTCP(c); tc != nil && r.Buffered() == 0 {
		if sock, err := sockio.New(tc, sockio.BusyPoll{}); err == nil {
			s.sock = sock
			r.Reset(sock)
		}
	}
	return s
}

// plainTCP is the TCP connection under c when nothing (TLS, bytes to
// replay) stands between them, or nil.
func plainTCP(c net.Conn) *net.TCPConn {
	for {
		switch x := c.(type) {
		case *net.TCPConn:
			return x
		case *replayConn:
			if len(x.head) > 0 {
				return nil
			}
			c = x.Conn
		default:
			return nil
		}
	}
}

// abort closes the connection with a reset: what this end has not sent
// yet is dropped, and the peer learns of the end at once, so requests of
// a lane given up (peerConn.connBroke) are unlikely to start at the peer
// after those of its successor, which takes a dial and an opening first
// (what the peer had read already it still runs).
func (s *connStream) abort() {
	raw := s.c
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn() // no close_notify: it could wait on a full socket
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = raw.Close()
}

// spareBytes is the size past which a reused buffer is dropped after use
// (a big message does not pin its buffer for the connection's life).
const spareBytes = 4 << 20

func (s *connStream) Send(f *pb.Frame) error {
	buf, err := s.encode(f)
	if err != nil {
		return err
	}
	n := 0
	if s.sock != nil {
		n, err = s.sock.WriteNow(buf)
	}
	if err == nil && n < len(buf) {
		_, err = s.c.Write(buf[n:])
	}
	s.keep(buf)
	return err
}

// nonBlocking: trySend works over plain TCP only.
func (s *connStream) nonBlocking() bool { return s.sock != nil }

// trySend writes f as far as the socket takes it without blocking and
// returns the bytes it did not take (nil when it took them all), which
// are the caller's from then on: they must be sent (sendRest) before
// anything else.
func (s *connStream) trySend(f *pb.Frame) (rest []byte, err error) {
	buf, err := s.encode(f)
	if err != nil {
		return nil, err
	}
	n, err := s.sock.WriteNow(buf)
	if err == nil && n < len(buf) {
		s.out = nil // the rest is the caller's
		return buf[n:], nil
	}
	s.keep(buf)
	return nil, err
}

// sendRest writes what trySend left, blocking until the socket takes it.
func (s *connStream) sendRest(b []byte) error {
	_, err := s.c.Write(b)
	return err
}

// encode is f with its length in front, in Send's reused buffer.
func (s *connStream) encode(f *pb.Frame) ([]byte, error) {
	size := f.SizeVT()
	if size > s.max {
		return nil, status.Errorf(codes.ResourceExhausted, "frame of %d bytes (limit %d)", size, s.max)
	}
	buf := slices.Grow(s.out[:0], 4+size)[:4+size]
	binary.BigEndian.PutUint32(buf, uint32(size))
	// The encoding must fill the size exactly: vtprotobuf writes back to
	// front, so a short one would leave stale bytes under a right length
	// (clusterpb's doc.go says when the pinned generator's sizes are off).
	n, err := f.MarshalToSizedBufferVT(buf[4:])
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes encoded, %d sized", n, size)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding a frame: %w", err)
	}
	return buf, nil
}

// keep takes buf back as Send's buffer, unless it grew too big to pin.
func (s *connStream) keep(buf []byte) {
	if cap(buf) <= spareBytes {
		s.out = buf[:0]
	} else {
		s.out = nil
	}
}

func (s *connStream) Recv() (*pb.Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint32(hdr[:]))
	if size > s.max {
		return nil, malformed("frame of %d bytes (limit %d)", size, s.max)
	}
	buf, err := s.readBody(size)
	if err != nil {
		return nil, err
	}
	f := &pb.Frame{}
	if err := f.UnmarshalVT(buf); err != nil {
		return nil, malformed("frame: %v", err)
	}
	return f, nil
}

// frameBuffered reports whether a whole frame is read already: s's next
// Recv returns without waiting for the peer.
func (s *connStream) frameBuffered() bool {
	n := s.r.Buffered()
	if n < 4 {
		return false
	}
	hdr, err := s.r.Peek(4)
	return err == nil && int(binary.BigEndian.Uint32(hdr)) <= n-4
}

// frameBuffered reports whether s's next Recv returns without waiting for
// the peer (known of a call lane only).
func frameBuffered(s frameStream) bool {
	cs, ok := s.(*connStream)
	return ok && cs.frameBuffered()
}

// readBody reads a frame's size bytes into the reused buffer, growing it
// as the bytes come (a length alone never makes a big allocation).
func (s *connStream) readBody(size int) ([]byte, error) {
	buf := s.in[:0]
	for len(buf) < size {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(size, max(2*cap(buf), 64<<10)))
			copy(grown, buf)
			buf = grown
		}
		n, err := s.r.Read(buf[len(buf):min(size, cap(buf))])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < size {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	if cap(buf) <= spareBytes {
		s.in = buf[:0]
	} else {
		s.in = nil
	}
	return buf, nil
}

// dialLane opens a call lane to node at addr.
func (n *GRPCNetwork) dialLane(ctx context.Context, node, addr string) (*connStream, error) {
	ctx, cancel := context.WithTimeout(ctx, laneHandshakeTime)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	setUserTimeout(c, n.cfg.KeepaliveInterval)
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	s, err := n.openLane(c, hostOf(addr))
	if !stop() {
		err = errors.Join(ctx.Err(), err)
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("call lane to %s at %s: %w", node, addr, err)
	}
	return s, nil
}

// openLane is the dialler's side of a lane's opening on c.
func (n *GRPCNetwork) openLane(c net.Conn, host string) (*connStream, error) {
	if _, err := io.WriteString(c, laneMagic); err != nil {
		return nil, err
	}
	conn := c
	if n.cliTLS != nil {
		cfg := n.cliTLS.Clone()
		cfg.ServerName = host
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			var rh tls.RecordHeaderError
			if errors.As(err, &rh) && string(rh.RecordHeader[:]) == laneMagic[:len(rh.RecordHeader)] {
				return nil, refusedError{status.Error(codes.Unavailable, "peer refused the call lane: it has no TLS between nodes (cluster.tls)")}
			}
			// An older node's TLS server closes what it cannot read as
			// a ClientHello, without an alert.
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				return nil, fmt.Errorf("%w: %v", errNoLane, err)
			}
			return nil, err
		}
		conn = tc
	}
	if _, err := conn.Write(appendHello(nil, n.core.node, n.cfg.Secret)); err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	head := make([]byte, len(laneMagic))
	if n, err := io.ReadFull(r, head); err != nil && (n == 0 || string(head[:n]) == laneMagic[:n]) {
		return nil, err // closed: the listener shut down, a reset
	}
	if string(head) != laneMagic {
		return nil, errNoLane // an older node's HTTP/2 server's SETTINGS
	}
	answer, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	switch answer {
	case laneOK:
		return newConnStream(conn, r, n.maxMsg+frameBytes), nil
	case laneRefused:
		code, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		reason, err := readField(r)
		if err != nil {
			return nil, err
		}
		c := codes.Code(code)
		if c == codes.OK || c > codes.Unauthenticated {
			c = codes.Unavailable // a refusal is never OK
		}
		return nil, refusedError{status.Errorf(c, "peer refused the call lane: %s", reason)}
	default:
		return nil, fmt.Errorf("lane answer %d", answer)
	}
}

// serveLane is the listener's side of a lane (mux.go found its magic):
// the opening, then the peer's calls until the connection ends.
func (n *GRPCNetwork) serveLane(c net.Conn) {
	defer c.Close()
	defer context.AfterFunc(n.ctx, func() { _ = c.Close() })()
	_ = c.SetDeadline(time.Now().Add(laneHandshakeTime))
	// A TLS record (a ClientHello) or a hello (a node name's length, at
	// most 255, never a TLS record's first byte): a dialler whose TLS
	// setting is not this node's is refused with the reason, not taken
	// for a node without lanes.
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		return
	}
	if isTLS := first[0] == tlsHandshakeRecord; isTLS != (n.srvTLS != nil) {
		reason := "this node requires TLS between nodes (cluster.tls)"
		if isTLS {
			reason = "this node has no TLS between nodes (cluster.tls)"
		}
		if addr := c.RemoteAddr().String(); n.refusals.first("lane tls " + hostOf(addr)) {
			n.log.Warn("cluster peer refused: its TLS setting differs from this node's", "addr", addr)
		}
		_, _ = c.Write(refusal(codes.Unavailable, reason))
		return
	}
	var conn net.Conn = &replayConn{Conn: c, head: first[:]}
	if n.srvTLS != nil {
		tc := tls.Server(conn, n.srvTLS)
		if err := tc.Handshake(); err != nil {
			n.log.Debug("cluster call lane: TLS handshake failed", "addr", c.RemoteAddr().String(), "error", err)
			return
		}
		conn = tc
	}
	// A small reader until the peer is known: the lane's own comes after.
	r := bufio.NewReaderSize(conn, 64)
	from, err := readField(r)
	if err != nil {
		return
	}
	secret, err := readField(r)
	if err != nil {
		return
	}
	sum := sha256.Sum256(secret)
	refuse, code := "", codes.OK
	switch {
	case subtle.ConstantTimeCompare(sum[:], n.secret[:]) != 1:
		addr := c.RemoteAddr().String()
		if n.refusals.first("lane " + hostOf(addr)) { // a lane's port is new at each dial
			n.log.Warn("cluster peer refused: wrong or missing join secret", "addr", addr, "node", string(from))
		}
		refuse, code = "join secret does not match", codes.Unauthenticated
	case len(from) == 0 || len(from) > 255:
		refuse, code = "no node name", codes.InvalidArgument
	case r.Buffered() > 0:
		refuse, code = "frames before the answer", codes.InvalidArgument
	}
	if refuse != "" {
		_, _ = conn.Write(refusal(code, refuse))
		return
	}
	if _, err := conn.Write(append([]byte(laneMagic), laneOK)); err != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	l := &serverLink{
		link: newLink(n.ctx, newConnStream(conn, bufio.NewReaderSize(conn, 64<<10), n.maxMsg+frameBytes), &n.stats, queueBytes),
		n:    n, kind: calls, from: string(from),
		inflight: map[uint64]context.CancelFunc{}, queues: map[string][]func(){}, snaps: map[uint64]*snapIn{},
	}
	// The link ends with the Network or when serve returns (shut): the
	// connection closes then, which also frees a writer stuck on a peer
	// that does not read.
	context.AfterFunc(l.ctx, func() { _ = conn.Close() })
	switch err := l.serve(); {
	case err == nil || n.ctx.Err() != nil || status.Code(err) == codes.InvalidArgument:
		// Closed, or a malformed message (serve logged it).
	case errors.Is(err, errMalformed):
		n.log.Warn("cluster peer sent a malformed frame; closing its call lane", "peer", string(from), "error", err)
	default:
		n.log.Debug("cluster call lane ended", "peer", string(from), "error", err)
	}
}

// appendHello appends a lane's hello to b: node name and join secret,
// each a field (appendField; both at most maxHelloField).
func appendHello(b []byte, node, secret string) []byte {
	return appendField(appendField(b, node), secret)
}

// appendField appends s to b as readField reads it: a 2-byte length and
// the bytes.
func appendField(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// tlsHandshakeRecord is the first byte of a TLS handshake record.
const tlsHandshakeRecord = 0x16

// refusal is the listener's answer refusing a lane: the gRPC code the
// dialler's calls fail with (as gRPC's refusal of the same peer would
// give) and the reason.
func refusal(code codes.Code, reason string) []byte {
	return appendField(append([]byte(laneMagic), laneRefused, byte(code)), reason)
}

// readField reads a 2-byte length and that many bytes (at most
// maxHelloField).
func readField(r *bufio.Reader) ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint16(hdr[:]))
	if size > maxHelloField {
		return nil, malformed("hello field of %d bytes", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}
