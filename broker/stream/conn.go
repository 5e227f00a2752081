package stream

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/broker/auth"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/stream/proto"
	"github.com/warrenmq/warren/broker/vhost"
)

const codeOK = proto.CodeOK

// A connection's read buffer: small before open, then large enough that a
// publisher's frames are read with few system calls. It grows beyond with
// the frames that arrive, up to the frame max.
const (
	preOpenReadBuffer = 4 << 10
	openReadBuffer    = 64 << 10
)

// handshake states of a connection.
const (
	stateNew    = iota // before authentication
	stateTune          // authenticated, waiting for the client's tune
	stateOpen          // tuned, waiting for open
	stateOpened        // open: every command allowed
)

// conn is one client connection. Its reader goroutine (serve) decodes
// frames and runs commands in order; output.run writes. Publishers and
// subscriptions are changed by the reader and by stream deletion, under mu.
type conn struct {
	srv *Server
	nc  net.Conn
	rd  *proto.Reader
	out *output

	state       int
	user        string
	vh          *vhost.Vhost
	vhost       atomic.Pointer[string] // the open vhost name, for CloseVhost
	perm        meta.CompiledPermission
	frameMax    atomic.Uint32
	heartbeat   atomic.Int64 // negotiated, nanoseconds
	deliverV2   atomic.Bool  // the client takes deliver v2 (exchange command versions)
	clientProps map[string]string

	mu         sync.Mutex
	publishers map[uint8]*publisher
	subs       map[uint8]*subscription
	updates    map[uint32]*subscription // consumer updates awaiting a response
	nextCorr   uint32
	closing    atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc
	closed chan struct{} // closed by closeWith
	// overTLS is set for connections accepted by ServeTLS (before serve).
	overTLS bool
	pub     proto.Publish // reused by the publish path
	dups    []uint64
	dirty   []*streamState // streams with publishes not yet flushed
}

func newConn(s *Server, nc net.Conn) *conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &conn{
		srv:        s,
		nc:         nc,
		rd:         proto.NewReader(nc, preOpenReadBuffer),
		out:        newOutput(s.cfg.OutputBufferBytes),
		publishers: map[uint8]*publisher{},
		subs:       map[uint8]*subscription{},
		updates:    map[uint32]*subscription{},
		closed:     make(chan struct{}),
	}
	c.frameMax.Store(s.cfg.FrameMax)
	return c
}

// protoError closes the connection with a code.
type protoError struct {
	code   uint16
	reason string
}

func (e *protoError) Error() string { return fmt.Sprintf("%s: %s", proto.CodeText(e.code), e.reason) }

func closeErr(code uint16, format string, args ...any) error {
	return &protoError{code: code, reason: fmt.Sprintf(format, args...)}
}

func (c *conn) serve(ctx context.Context) {
	c.ctx, c.cancel = context.WithCancel(ctx)
	defer c.cancel()
	werr := make(chan error, 1)
	go func() {
		werr <- c.out.run(c.nc, func() time.Duration { return time.Duration(c.heartbeat.Load()) })
	}()
	err := c.safely(c.readLoop)
	c.teardown()
	var pe *protoError
	switch {
	case errors.As(err, &pe):
		c.srv.log.Debug("stream: closing connection", "remote", c.nc.RemoteAddr(), "code", pe.code, "reason", pe.reason)
		c.closeWith(pe.code, pe.reason)
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !c.closing.Load():
		c.srv.log.Debug("stream: connection error", "remote", c.nc.RemoteAddr(), "err", err)
		c.out.close()
	default:
		c.out.finish()
	}
	select {
	case <-werr:
	case <-time.After(5 * time.Second):
		c.out.close()
	}
	_ = c.nc.Close()
}

// safely runs the reader. A panic in it is a bug, and this is only the
// last line against it: logged at error with its stack, it closes this
// connection alone (code internal error; teardown runs) instead of ending
// the process.
func (c *conn) safely(read func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.srv.log.Error("stream: recovered from a panic, closing the connection", "remote", c.nc.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
			err = closeErr(proto.CodeInternalError, "internal error")
		}
	}()
	return read()
}

// closeWith sends a close request and closes the socket once it is
// written (the client's close response is not awaited).
func (c *conn) closeWith(code uint16, reason string) {
	if c.closing.Swap(true) {
		return
	}
	close(c.closed)
	c.srv.Counters.countError(code)
	c.out.send(&proto.Close{CorrelationID: c.corr(), Code: code, Reason: reason})
	c.out.finish()
	// Unblock the reader.
	_ = c.nc.SetReadDeadline(time.Now())
}

func (c *conn) corr() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextCorr++
	return c.nextCorr
}

// teardown writes what the connection published but had not flushed, and
// removes its publishers and subscriptions.
func (c *conn) teardown() {
	c.flushPublishes()
	c.cancel()
	c.mu.Lock()
	subs := make([]*subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	pubs := make([]*publisher, 0, len(c.publishers))
	for _, p := range c.publishers {
		pubs = append(pubs, p)
	}
	c.subs, c.publishers = map[uint8]*subscription{}, map[uint8]*publisher{}
	c.mu.Unlock()
	for _, s := range subs {
		s.stop()
	}
	for _, p := range pubs {
		p.st.release(c)
	}
}

func (c *conn) readLoop() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.HandshakeTimeout))
	for {
		if c.state == stateOpened {
			if hb := time.Duration(c.heartbeat.Load()); hb > 0 {
				_ = c.nc.SetReadDeadline(time.Now().Add(2*hb + 5*time.Second))
			} else {
				_ = c.nc.SetReadDeadline(time.Time{})
			}
		}
		max := c.frameMax.Load()
		if c.state < stateOpened && (max == 0 || max > c.srv.cfg.InitialFrameMax) {
			// As RabbitMQ: frames stay small until open succeeds.
			max = c.srv.cfg.InitialFrameMax
		}
		c.rd.SetMaxFrameSize(max)
		// A client that does not read what it is sent (confirms, above
		// all) stops being read: its output is bounded, and TCP holds its
		// publishes back.
		if !c.out.waitBelow(c.ctx, 2*c.srv.cfg.OutputBufferBytes) {
			return nil
		}
		body, err := c.rd.ReadFrame()
		if err != nil {
			if c.closing.Load() {
				return nil
			}
			switch {
			case errors.Is(err, proto.ErrFrameTooLarge):
				return closeErr(proto.CodeFrameTooLarge, "%v", err)
			case errors.Is(err, proto.ErrMalformed):
				return closeErr(proto.CodeUnknownFrame, "%v", err)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return closeErr(proto.CodeOK, "heartbeat or handshake timeout")
			}
			return err
		}
		if err := c.handle(body); err != nil {
			return err
		}
		if c.closing.Load() {
			return nil
		}
		if len(c.dirty) > 0 && !c.rd.FrameBuffered() {
			// The socket ran dry (no whole frame waiting): hand the batched
			// publishes to the log.
			c.flushPublishes()
		}
	}
}

// handle runs one frame.
func (c *conn) handle(body []byte) error {
	key, _, _ := proto.Header(body)
	if key == proto.KeyPublish && c.state == stateOpened {
		if c.srv.blocked.Load() != nil {
			// Resource alarm: hand over what is pending, then stop
			// reading this publisher until the alarm clears.
			c.flushPublishes()
			select {
			case <-c.srv.unblockedCh():
			case <-c.closed:
				return nil
			case <-c.ctx.Done():
				return nil
			}
		}
		if err := proto.DecodePublish(body, &c.pub); err != nil {
			return closeErr(proto.CodeUnknownFrame, "publish: %v", err)
		}
		c.publish(&c.pub)
		return nil
	}
	if key == proto.KeyCredit && c.state == stateOpened && len(body) == 7 {
		// Hot path: one per chunk for many consumers.
		c.credit(&proto.Credit{SubscriptionID: body[4], Credit: binary.BigEndian.Uint16(body[5:7])})
		return nil
	}
	cmd, err := proto.Decode(body)
	if err != nil {
		if id, ok := proto.CorrelationID(body); ok && errors.Is(err, proto.ErrUnknownCommand) && c.state == stateOpened {
			// A request we cannot serve: answer it, keep the connection.
			c.out.send(&proto.Response{For: key &^ proto.ResponseBit, CorrelationID: id, Code: proto.CodeUnknownFrame})
			return nil
		}
		return closeErr(proto.CodeUnknownFrame, "%v", err)
	}
	if c.state < stateOpened {
		return c.handshake(cmd)
	}
	return c.dispatch(cmd)
}

func (c *conn) handshake(cmd proto.Command) error {
	switch m := cmd.(type) {
	case *proto.PeerProperties:
		c.clientProps = m.Properties
		c.out.send(&proto.PeerPropertiesResponse{CorrelationID: m.CorrelationID, Code: codeOK, Properties: map[string]string{
			"product":        c.srv.cfg.Product,
			"version":        c.srv.cfg.Version,
			"warren_version": c.srv.cfg.WarrenVersion,
			"platform":       "Go",
			"copyright":      "Warren authors",
			"information":    "Warren, a RabbitMQ-compatible broker",
		}})
	case *proto.SaslHandshake:
		c.out.send(&proto.SaslHandshakeResponse{CorrelationID: m.CorrelationID, Code: codeOK, Mechanisms: []string{"PLAIN"}})
	case *proto.SaslAuthenticate:
		if c.state != stateNew {
			return closeErr(proto.CodeUnknownFrame, "already authenticated")
		}
		if m.Mechanism != "PLAIN" {
			c.respond(proto.KeySaslAuthenticate, m.CorrelationID, proto.CodeSaslMechanismNotSupported)
			return c.fail("", "mechanism not supported", "sasl mechanism %q not supported", m.Mechanism)
		}
		user, pass, ok := parsePlain(m.Data)
		if !ok {
			c.respond(proto.KeySaslAuthenticate, m.CorrelationID, proto.CodeSaslError)
			return c.fail("", "malformed credentials", "malformed PLAIN response")
		}
		if err := c.srv.backend.Authenticate(user, pass, c.nc.RemoteAddr()); err != nil {
			code := proto.CodeAuthenticationFailure
			if errors.Is(err, auth.ErrLoopbackOnly) {
				code = proto.CodeSaslAuthFailureLoopback
			}
			c.respond(proto.KeySaslAuthenticate, m.CorrelationID, code)
			reason, detail := auth.Refusal(err)
			return c.fail(user, reason, "PLAIN login refused: %s", detail)
		}
		c.user = user
		c.state = stateTune
		c.out.send(&proto.Response{For: proto.KeySaslAuthenticate, CorrelationID: m.CorrelationID, Code: codeOK})
		c.out.send(&proto.Tune{FrameMax: c.srv.cfg.FrameMax, Heartbeat: uint32(c.srv.cfg.Heartbeat / time.Second)})
	case *proto.Tune:
		// The client's tune comes with the response bit (0x8014) from most
		// clients, without it (0x0014) from rstream and the Node client;
		// RabbitMQ takes both.
		if c.state != stateTune {
			return closeErr(proto.CodeUnknownFrame, "unexpected tune")
		}
		fm := negotiate(c.srv.cfg.FrameMax, m.FrameMax)
		if fm != 0 && fm < 1024 {
			return closeErr(proto.CodePreconditionFailed, "frame max %d too small", fm)
		}
		c.frameMax.Store(fm)
		hb := negotiate(uint32(c.srv.cfg.Heartbeat/time.Second), m.Heartbeat)
		c.heartbeat.Store(int64(time.Duration(hb) * time.Second))
		c.state = stateOpen
	case *proto.Open:
		if c.state != stateOpen {
			return closeErr(proto.CodeUnknownFrame, "open before tune")
		}
		vh, ok := c.srv.backend.Vhost(m.Vhost)
		perm, pok := c.srv.backend.Permission(c.user, m.Vhost)
		if !ok || !pok {
			c.srv.Counters.countError(proto.CodeVirtualHostAccessFailure)
			c.out.send(&proto.OpenResponse{CorrelationID: m.CorrelationID, Code: proto.CodeVirtualHostAccessFailure})
			if !ok {
				return c.fail(c.user, "no such vhost", "vhost '%s' not found", m.Vhost)
			}
			return c.fail(c.user, "no access to the vhost", "access to vhost '%s' refused for user '%s'", m.Vhost, c.user)
		}
		c.vh, c.perm = vh, meta.CompilePermission(perm)
		c.vhost.Store(&m.Vhost)
		host, port := c.srv.advertised(c.overTLS)
		c.out.send(&proto.OpenResponse{CorrelationID: m.CorrelationID, Code: codeOK, Properties: map[string]string{
			"advertised_host": host, "advertised_port": strconv.Itoa(port),
		}})
		c.state = stateOpened
		c.rd.Grow(openReadBuffer)
	case *proto.Heartbeat:
	case *proto.Close:
		c.out.send(&proto.Response{For: proto.KeyClose, CorrelationID: m.CorrelationID, Code: codeOK})
		c.closing.Store(true)
		return nil
	default:
		return closeErr(proto.CodeUnknownFrame, "command %#04x before open", cmd.Key())
	}
	return nil
}

// fail ends the handshake after its error response was queued.
// It is logged at info, as the AMQP listener logs its refusals: the
// client, the user it named, a short reason (unknown user, wrong
// password, not allowed from this address, no such vhost, no access to the
// vhost, ...) and RabbitMQ's wording.
func (c *conn) fail(user, reason, format string, args ...any) error {
	c.srv.log.Info(fmt.Sprintf("Error on stream connection %s -> %s: %s", c.nc.RemoteAddr(), c.nc.LocalAddr(), fmt.Sprintf(format, args...)),
		"peer", c.nc.RemoteAddr().String(), "user", user, "reason", reason)
	c.closing.Store(true)
	return nil
}

func negotiate(server, client uint32) uint32 {
	if client == 0 || server == 0 {
		return max(client, server)
	}
	return min(client, server)
}

// parsePlain splits a SASL PLAIN response: [authzid] NUL user NUL password.
func parsePlain(b []byte) (user, pass string, ok bool) {
	parts := bytes.Split(b, []byte{0})
	if len(parts) != 3 {
		return "", "", false
	}
	return string(parts[1]), string(parts[2]), true
}

func (c *conn) dispatch(cmd proto.Command) error {
	switch m := cmd.(type) {
	case *proto.Heartbeat:
	case *proto.Close:
		c.out.send(&proto.Response{For: proto.KeyClose, CorrelationID: m.CorrelationID, Code: codeOK})
		c.closing.Store(true)
	case *proto.Response:
		// Close response after a server-initiated close; others ignored.
		if m.For == proto.KeyClose {
			c.closing.Store(true)
		}
	case *proto.PeerProperties, *proto.SaslHandshake, *proto.SaslAuthenticate, *proto.Open, *proto.Tune:
		return closeErr(proto.CodeUnknownFrame, "handshake command %#04x after open", cmd.Key())
	case *proto.ExchangeVersions:
		for _, v := range m.Commands {
			if v.Key == proto.KeyDeliver && v.Max >= 2 {
				c.deliverV2.Store(true)
			}
		}
		c.out.send(&proto.ExchangeVersionsResponse{CorrelationID: m.CorrelationID, Code: codeOK, Commands: proto.ServerVersions()})
	case *proto.CreateStream:
		c.respond(proto.KeyCreateStream, m.CorrelationID, c.createStream(m.Stream, m.Arguments))
	case *proto.DeleteStream:
		c.respond(proto.KeyDeleteStream, m.CorrelationID, c.deleteStream(m.Stream))
	case *proto.Metadata:
		c.metadata(m)
	case *proto.StreamStats:
		c.streamStats(m)
	case *proto.DeclarePublisher:
		c.respond(proto.KeyDeclarePublisher, m.CorrelationID, c.declarePublisher(m))
	case *proto.DeletePublisher:
		c.respond(proto.KeyDeletePublisher, m.CorrelationID, c.deletePublisher(m.PublisherID))
	case *proto.Publish:
		c.publish(m)
	case *proto.QueryPublisherSequence:
		c.queryPublisherSequence(m)
	case *proto.Subscribe:
		c.subscribe(m)
	case *proto.Credit:
		c.credit(m)
	case *proto.Unsubscribe:
		c.respond(proto.KeyUnsubscribe, m.CorrelationID, c.unsubscribe(m.SubscriptionID))
	case *proto.StoreOffset:
		c.storeOffset(m)
	case *proto.QueryOffset:
		c.queryOffset(m)
	case *proto.ConsumerUpdateResponse:
		c.consumerUpdateResponse(m)
	case *proto.CreateSuperStream:
		c.respond(proto.KeyCreateSuperStream, m.CorrelationID, c.createSuperStream(m))
	case *proto.DeleteSuperStream:
		c.respond(proto.KeyDeleteSuperStream, m.CorrelationID, c.deleteSuperStream(m.Name))
	case *proto.Route:
		c.route(m)
	case *proto.Partitions:
		c.partitions(m)
	default:
		// Server-to-client commands sent by a client.
		return closeErr(proto.CodeUnknownFrame, "unexpected command %#04x", cmd.Key())
	}
	return nil
}

// respond sends a generic response.
func (c *conn) respond(key uint16, corr uint32, code uint16) {
	c.srv.Counters.countError(code)
	c.out.send(&proto.Response{For: key, CorrelationID: corr, Code: code})
}
