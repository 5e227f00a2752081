package amqp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/sockio"
	"github.com/warrenmq/warren/broker/vhost"
)

// outputHighWater is the output buffer size above which queues stop
// delivering to a connection until the writer drains it.
const outputHighWater = 1 << 20

type conn struct {
	srv  *Server
	id   uint64
	nc   net.Conn
	r    *wire.Reader
	name string

	connectedAt time.Time
	frameMax    uint32
	channelMax  uint16
	heartbeat   time.Duration
	user        string
	vh          *vhost.Vhost
	perm        meta.CompiledPermission
	clientProps wire.Table
	capBlocked  atomic.Bool // client understands connection.blocked (read by alarm watchers during the handshake)
	capCancel   bool        // client understands server-sent basic.cancel

	// channels is touched only by the reader goroutine, except chMu-guarded
	// snapshots for the HTTP API.
	chMu     sync.Mutex
	channels map[uint16]*channel

	outMu   sync.Mutex
	out     []byte
	waiters []func()
	// writing is set (under outMu) while the writer goroutine writes
	// outside the lock; flushInline leaves the socket to it meanwhile.
	writing bool
	// sock reads the socket and does flushInline's non-blocking writes
	// (nil: TLS or not TCP).
	sock      *sockio.Socket
	outSignal chan struct{}
	done      chan struct{}
	// stopWriting asks the writer to flush what is buffered and exit;
	// writerDone is closed when it has.
	stopWriting chan struct{}
	writerDone  chan struct{}
	closeOnce   sync.Once

	batch publishBatch // reader only: publishes not yet handed to queues
	acks  ackBatch     // acks not yet handed to queues (its own lock: a timer flushes it too)

	// settleWaking is set while the reader settles a client's ack, nack
	// or reject and wakes the consumers it gave credit back to. A
	// consumer's Flush meanwhile (on the reader's goroutine, where a
	// stream delivers, or on a queue's) only sets flushDeferred and leaves
	// the socket write to the reader, which flushes before it handles any
	// frame but another settlement and before it can block (readLoop):
	// the deliveries for acks read together go out in one write.
	settleWaking  atomic.Bool
	flushDeferred atomic.Bool

	// wantAcks is set when a consumer is refused a delivery for lack of
	// credit, and cleared when the reader reads an ack, nack or reject (or
	// spun for one in vain): while it is set the reader busy-polls the
	// socket before it sleeps (Config.BusyPoll).
	wantAcks atomic.Bool

	wroteInline atomic.Bool // flushInline wrote since the writer's last heartbeat check
	closeSent   atomic.Bool // we sent connection.close and wait for close-ok
	blockedNow  atomic.Bool // connection.blocked was sent
	state       atomic.Value
	recvOct     atomic.Uint64
	sendOct     atomic.Uint64
}

func newConn(s *Server, id uint64, nc net.Conn) *conn {
	c := &conn{
		srv:         s,
		id:          id,
		nc:          nc,
		r:           wire.NewReader(nc, 64<<10),
		name:        fmt.Sprintf("%s -> %s", nc.RemoteAddr(), nc.LocalAddr()),
		connectedAt: time.Now(),
		channels:    map[uint16]*channel{},
		outSignal:   make(chan struct{}, 1),
		done:        make(chan struct{}),
		stopWriting: make(chan struct{}),
		writerDone:  make(chan struct{}),
	}
	if sock, err := sockio.New(nc, sockio.BusyPoll{
		For:      s.cfg.BusyPoll,
		Spinners: s.spinners,
		Want:     c.wantAcks.Load,
		TimedOut: func() { c.wantAcks.Store(false) },
	}); err == nil {
		c.sock = sock
		c.r = wire.NewReader(sock, 64<<10)
	}
	c.acks.init()
	c.state.Store("starting")
	return c
}

// inlineWriteMax is the most flushInline writes: a small batch (confirms,
// a few deliveries) goes out at once from the goroutine that made it;
// bigger ones go to the writer goroutine, so a queue's goroutine does not
// spend its time copying into socket buffers while it could be delivering.
const inlineWriteMax = 32 << 10

// flushInline writes the output buffer on the calling goroutine as far as
// the socket takes it without blocking, and leaves the rest (if any) to
// the writer goroutine. Goroutines call it when they finish a batch (the
// reader before it blocks on the socket, a queue at the end of its turn):
// their frames go out without waking the writer, and a goroutine never
// waits on a slow client.
// It reports whether output remains for the writer.
func (c *conn) flushInline() (rest bool) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.sock == nil || c.writing || len(c.out) == 0 || len(c.out) > inlineWriteMax || len(c.waiters) > 0 {
		return len(c.out) > 0
	}
	// A full socket or an error leaves the rest to the writer goroutine,
	// which blocks on the socket or sees the error.
	n, _ := c.sock.WriteNow(c.out)
	if n == 0 {
		return true
	}
	c.sendOct.Add(uint64(n))
	c.wroteInline.Store(true)
	c.out = c.out[:copy(c.out, c.out[n:])]
	return len(c.out) > 0
}

// send appends frames to the output buffer under outMu via fn and wakes the writer.
func (c *conn) send(fn func(b []byte) []byte) {
	c.outMu.Lock()
	c.out = fn(c.out)
	c.outMu.Unlock()
	c.signal()
}

// sendQuiet appends frames like send without waking the writer: the
// reader's flush (before it blocks on anything) writes them. Reader only.
func (c *conn) sendQuiet(fn func(b []byte) []byte) {
	c.outMu.Lock()
	c.out = fn(c.out)
	c.outMu.Unlock()
}

// flush writes what is buffered inline, and wakes the writer for whatever
// the socket did not take. The reader calls it before anything that may
// block it, so frames from sendQuiet never wait.
func (c *conn) flush() {
	if c.flushInline() {
		c.signal()
	}
}

func (c *conn) signal() {
	select {
	case c.outSignal <- struct{}{}:
	default:
	}
}

func (c *conn) sendMethod(ch uint16, m wire.Method) {
	c.send(func(b []byte) []byte { return wire.AppendMethodFrame(b, ch, m) })
}

// outputFullLocked reports whether the output buffer is over its
// high-water mark; if so wake is called once the writer has drained it.
// c.outMu is held.
func (c *conn) outputFullLocked(wake func()) bool {
	if len(c.out) < outputHighWater {
		return false
	}
	c.waiters = append(c.waiters, wake)
	return true
}

func (c *conn) writeLoop() {
	defer close(c.writerDone)
	var spare []byte
	var idle *time.Ticker
	var tick <-chan time.Time
	if c.heartbeat > 0 {
		idle = time.NewTicker(c.heartbeat / 2)
		defer idle.Stop()
		tick = idle.C
	}
	wrote := true
	stopping := false
	for {
		select {
		case <-c.outSignal:
		case <-c.stopWriting:
			stopping = true
		case <-tick:
			if c.wroteInline.Swap(false) {
				wrote = true
			}
			if !wrote {
				c.send(wire.AppendHeartbeat)
			}
			wrote = false
			continue
		case <-c.done:
			return
		}
		c.outMu.Lock()
		buf := c.out
		c.out = spare[:0]
		waiters := c.waiters
		c.waiters = nil
		c.writing = len(buf) > 0
		c.outMu.Unlock()
		if len(buf) > 0 {
			wrote = true
			_, err := c.nc.Write(buf)
			c.outMu.Lock()
			c.writing = false
			again := len(c.out) > 0
			c.outMu.Unlock()
			if err != nil {
				c.shutdownSocket()
				return
			}
			c.sendOct.Add(uint64(len(buf)))
			if again {
				c.signal()
			}
		}
		if cap(buf) > 4<<20 {
			buf = nil
		}
		spare = buf
		for _, w := range waiters {
			w()
		}
		if stopping {
			c.outMu.Lock()
			empty := len(c.out) == 0
			c.outMu.Unlock()
			if empty {
				return
			}
		}
	}
}

// stopWriter lets the writer flush what is buffered, then waits for it.
func (c *conn) stopWriter() {
	_ = c.nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
	close(c.stopWriting)
	select {
	case <-c.writerDone:
	case <-time.After(3 * time.Second):
	}
}

func (c *conn) shutdownSocket() {
	c.closeOnce.Do(func() {
		close(c.done)
		_ = c.nc.Close()
	})
}

func (c *conn) serve(ctx context.Context) {
	defer c.shutdownSocket()
	if err := c.handshake(); err != nil {
		c.srv.log.Debug("amqp handshake failed", "remote", c.nc.RemoteAddr(), "err", err)
		return
	}
	c.state.Store("running")
	go c.writeLoop()
	err := c.readLoop(ctx)
	c.state.Store("closing")
	_ = c.flushPublishes(context.WithoutCancel(ctx))
	c.cleanup(ctx)
	c.acks.flush() // what cleanup settled
	c.acks.stop()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, errClientClosed) {
		c.srv.log.Debug("amqp connection closed", "conn", c.name, "err", err)
	}
	c.stopWriter()
}

func (c *conn) serverProperties() wire.Table {
	return wire.Table{
		"product":      c.srv.cfg.Product,
		"version":      c.srv.cfg.Version,
		"platform":     "Go",
		"copyright":    "Warren authors",
		"information":  "Licensed under the Apache License 2.0",
		"cluster_name": "warren",
		"capabilities": wire.Table{
			"publisher_confirms":           true,
			"exchange_exchange_bindings":   true,
			"basic.nack":                   true,
			"consumer_cancel_notify":       true,
			"connection.blocked":           true,
			"consumer_priorities":          true,
			"authentication_failure_close": true,
			"per_consumer_qos":             true,
			"direct_reply_to":              false,
		},
	}
}

// handshake runs protocol header, start, tune and open.
func (c *conn) handshake() error {
	_ = c.nc.SetDeadline(time.Now().Add(c.srv.cfg.HandshakeTimeout))
	hdr, err := c.r.ReadProtocolHeader()
	if err != nil {
		return fmt.Errorf("read protocol header: %w", err)
	}
	if string(hdr[:]) != wire.ProtocolHeader {
		_, _ = c.nc.Write([]byte(wire.ProtocolHeader))
		return fmt.Errorf("bad protocol header %q", hdr[:])
	}
	c.r.SetMaxFrameSize(wire.FrameMinSize)
	write := func(m wire.Method) error {
		_, err := c.nc.Write(wire.AppendMethodFrame(nil, 0, m))
		return err
	}
	if err := write(&wire.ConnectionStart{VersionMajor: 0, VersionMinor: 9, ServerProperties: c.serverProperties(), Mechanisms: "PLAIN AMQPLAIN", Locales: "en_US"}); err != nil {
		return err
	}
	m, err := c.readHandshakeMethod()
	if err != nil {
		return err
	}
	startOk, ok := m.(*wire.ConnectionStartOk)
	if !ok {
		return c.handshakeFail(newError(wire.CommandInvalid, "expected 'connection.start_ok', got '%s'", m.Name()))
	}
	c.clientProps = startOk.ClientProperties
	if caps, ok := c.clientProps["capabilities"].(wire.Table); ok {
		blocked, _ := caps["connection.blocked"].(bool)
		c.capBlocked.Store(blocked)
		c.capCancel, _ = caps["consumer_cancel_notify"].(bool)
	}
	user, pass, err := decodeSASL(startOk.Mechanism, startOk.Response)
	if err != nil {
		return c.handshakeFail(newError(wire.AccessRefused, "%s", err))
	}
	if err := c.srv.backend.Authenticate(user, pass, c.nc.RemoteAddr()); err != nil {
		return c.handshakeFail(newError(wire.AccessRefused, "Login was refused using authentication mechanism %s. For details see the broker logfile.", startOk.Mechanism))
	}
	c.user = user
	hb := uint16(c.srv.cfg.Heartbeat / time.Second)
	if err := write(&wire.ConnectionTune{ChannelMax: c.srv.cfg.ChannelMax, FrameMax: c.srv.cfg.FrameMax, Heartbeat: hb}); err != nil {
		return err
	}
	if m, err = c.readHandshakeMethod(); err != nil {
		return err
	}
	tuneOk, ok := m.(*wire.ConnectionTuneOk)
	if !ok {
		return c.handshakeFail(newError(wire.CommandInvalid, "expected 'connection.tune_ok', got '%s'", m.Name()))
	}
	c.frameMax = negotiate32(c.srv.cfg.FrameMax, tuneOk.FrameMax)
	if c.frameMax < wire.FrameMinSize {
		return c.handshakeFail(newError(wire.NotAllowed, "frame_max=%d < %d min size", tuneOk.FrameMax, wire.FrameMinSize))
	}
	c.channelMax = uint16(negotiate32(uint32(c.srv.cfg.ChannelMax), uint32(tuneOk.ChannelMax)))
	c.heartbeat = time.Duration(tuneOk.Heartbeat) * time.Second
	c.r.SetMaxFrameSize(c.frameMax)
	if m, err = c.readHandshakeMethod(); err != nil {
		return err
	}
	open, ok := m.(*wire.ConnectionOpen)
	if !ok {
		return c.handshakeFail(newError(wire.CommandInvalid, "expected 'connection.open', got '%s'", m.Name()))
	}
	vh, ok := c.srv.backend.Vhost(open.VirtualHost)
	if !ok {
		return c.handshakeFail(newError(wire.NotAllowed, "vhost '%s' not found", open.VirtualHost))
	}
	perm, ok := c.srv.backend.Permission(user, open.VirtualHost)
	if !ok {
		return c.handshakeFail(newError(wire.NotAllowed, "access to vhost '%s' refused for user '%s'", open.VirtualHost, user))
	}
	c.vh, c.perm = vh, meta.CompilePermission(perm)
	if err := write(&wire.ConnectionOpenOk{}); err != nil {
		return err
	}
	_ = c.nc.SetDeadline(time.Time{})
	return nil
}

func negotiate32(server, client uint32) uint32 {
	if client == 0 || (server != 0 && server < client) {
		return server
	}
	return client
}

func (c *conn) readHandshakeMethod() (wire.Method, error) {
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			return nil, fmt.Errorf("read handshake frame: %w", err)
		}
		c.recvOct.Add(uint64(len(f.Payload)) + 8)
		if f.Type == wire.FrameHeartbeat {
			continue
		}
		if f.Type != wire.FrameMethod || f.Channel != 0 {
			return nil, c.handshakeFail(newError(wire.UnexpectedFrame, "expected a method frame on channel 0"))
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return nil, c.handshakeFail(newError(wire.FrameError, "cannot decode method: %v", err))
		}
		if cl, ok := m.(*wire.ConnectionClose); ok {
			_, _ = c.nc.Write(wire.AppendMethodFrame(nil, 0, &wire.ConnectionCloseOk{}))
			return nil, fmt.Errorf("client closed during handshake: %d %s", cl.ReplyCode, cl.ReplyText)
		}
		return m, nil
	}
}

// handshakeFail sends connection.close and returns the error.
func (c *conn) handshakeFail(e *Error) error {
	_, _ = c.nc.Write(wire.AppendMethodFrame(nil, 0, &wire.ConnectionClose{ReplyCode: e.Code, ReplyText: e.Text, ClassId: e.ClassID, MethodId: e.MethodID}))
	// Give the client a moment to read it before the socket goes.
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = c.r.ReadFrame()
	return e
}

func decodeSASL(mechanism, response string) (string, string, error) {
	switch mechanism {
	case "PLAIN":
		parts := strings.SplitN(response, "\x00", 3)
		if len(parts) != 3 {
			return "", "", errors.New("malformed PLAIN response")
		}
		return parts[1], parts[2], nil
	case "AMQPLAIN":
		var b bytes.Buffer
		n := len(response)
		b.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
		b.WriteString(response)
		t, _, err := wire.DecodeTable(b.Bytes())
		if err != nil {
			return "", "", fmt.Errorf("malformed AMQPLAIN response: %w", err)
		}
		u, _ := t["LOGIN"].(string)
		p, _ := t["PASSWORD"].(string)
		return u, p, nil
	}
	return "", "", fmt.Errorf("unsupported authentication mechanism '%s'", mechanism)
}

func (c *conn) readLoop(ctx context.Context) error {
	var lastDeadline time.Time
	for frames := 0; ; frames++ {
		// The clock is not free: look at it before a read that will reach
		// the socket, and every 64 frames (the buffer may never run dry
		// under a steady flow).
		if c.heartbeat > 0 && (frames&63 == 0 || c.r.Buffered() == 0) {
			if now := time.Now(); now.Sub(lastDeadline) > c.heartbeat/4 {
				_ = c.nc.SetReadDeadline(now.Add(2 * c.heartbeat))
				lastDeadline = now
			}
		}
		if c.flushDeferred.Load() && !c.nextFrameSettles() {
			c.flushDeferred.Store(false)
			c.flush()
		}
		if c.r.Buffered() == 0 {
			if c.batch.n > 0 {
				if err := c.flushPublishes(ctx); err != nil {
					return err
				}
			} else {
				c.acks.flushSoon()
			}
			c.flush()
		}
		f, err := c.r.ReadFrame()
		if err != nil {
			switch {
			case errors.Is(err, wire.ErrFrameTooLarge):
				c.closeWith(newError(wire.FrameError, "frame size exceeds frame_max %d", c.frameMax))
			case errors.Is(err, wire.ErrBadFrameEnd), errors.Is(err, wire.ErrBadFrameType), errors.Is(err, wire.ErrMalformed):
				c.closeWith(newError(wire.FrameError, "malformed frame: %v", err))
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
				return fmt.Errorf("missed heartbeats from client, timeout: %s", 2*c.heartbeat)
			}
			return err
		}
		c.recvOct.Add(uint64(len(f.Payload)) + 8)
		if c.closeSent.Load() {
			if f.Type == wire.FrameMethod && f.Channel == 0 {
				if m, err := wire.DecodeMethod(f.Payload); err == nil {
					switch m.(type) {
					case *wire.ConnectionCloseOk:
						return nil
					case *wire.ConnectionClose:
						c.sendMethod(0, &wire.ConnectionCloseOk{})
						return nil
					}
				}
			}
			continue
		}
		if err := c.handleFrame(ctx, f); err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				c.closeWith(pe)
				continue
			}
			return err
		}
	}
}

// nextFrameSettles reports whether the next frame is buffered whole and is
// a basic.ack, basic.nack or basic.reject: handling it neither blocks nor
// waits, so output deferred by settlements may wait for it.
func (c *conn) nextFrameSettles() bool {
	class, method, ok := c.r.NextMethod()
	if !ok || class != wire.ClassBasic {
		return false
	}
	var ack wire.BasicAck
	var nack wire.BasicNack
	var reject wire.BasicReject
	return method == ack.MethodID() || method == nack.MethodID() || method == reject.MethodID()
}

// errClientClosed ends the read loop after connection.close from the client.
var errClientClosed = errors.New("client closed the connection")

func (c *conn) handleFrame(ctx context.Context, f wire.Frame) error {
	switch f.Type {
	case wire.FrameHeartbeat:
		if f.Channel != 0 {
			return newError(wire.FrameError, "heartbeat frame on channel %d", f.Channel)
		}
		return nil
	case wire.FrameMethod, wire.FrameHeader, wire.FrameBody:
	default:
		return newError(wire.FrameError, "unknown frame type %d", f.Type)
	}
	if f.Channel == 0 {
		if f.Type != wire.FrameMethod {
			return newError(wire.CommandInvalid, "content frame on channel 0")
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return newError(wire.FrameError, "cannot decode method: %v", err)
		}
		switch m := m.(type) {
		case *wire.ConnectionClose:
			c.sendMethod(0, &wire.ConnectionCloseOk{})
			_ = m
			return errClientClosed
		case *wire.ConnectionCloseOk:
			return errClientClosed
		case *wire.ConnectionBlocked, *wire.ConnectionUnblocked:
			return nil
		default:
			return newError(wire.CommandInvalid, "unexpected method '%s' on channel 0", m.Name())
		}
	}
	if f.Channel > c.channelMax {
		return newError(wire.ChannelError, "channel %d exceeds channel_max %d", f.Channel, c.channelMax)
	}
	ch := c.channels[f.Channel]
	if ch == nil {
		if f.Type != wire.FrameMethod {
			return newError(wire.ChannelError, "expected 'channel.open' on channel %d", f.Channel)
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return newError(wire.FrameError, "cannot decode method: %v", err)
		}
		if _, ok := m.(*wire.ChannelOpen); !ok {
			if _, ok := m.(*wire.ChannelCloseOk); ok {
				return nil
			}
			return newError(wire.ChannelError, "expected 'channel.open' on channel %d", f.Channel)
		}
		ch = newChannel(c, f.Channel)
		c.chMu.Lock()
		c.channels[f.Channel] = ch
		c.chMu.Unlock()
		c.sendMethod(f.Channel, &wire.ChannelOpenOk{})
		return nil
	}
	return ch.handleFrame(ctx, f)
}

// closeWith starts a connection close with an error (hard error).
func (c *conn) closeWith(e *Error) {
	if c.closeSent.Swap(true) {
		return
	}
	c.sendMethod(0, &wire.ConnectionClose{ReplyCode: e.Code, ReplyText: e.Text, ClassId: e.ClassID, MethodId: e.MethodID})
	go func() {
		select {
		case <-time.After(3 * time.Second):
			c.shutdownSocket()
		case <-c.done:
		}
	}()
}

// forceClose closes the connection from outside the reader (HTTP API, shutdown).
func (c *conn) forceClose(reason string) {
	c.closeWith(newError(wire.ConnectionForced, "%s", reason))
}

func (c *conn) alarmChanged(reason string) {
	if !c.capBlocked.Load() {
		return
	}
	if reason != "" {
		if !c.blockedNow.Swap(true) {
			c.sendMethod(0, &wire.ConnectionBlocked{Reason: reason})
		}
		return
	}
	if c.blockedNow.Swap(false) {
		c.sendMethod(0, &wire.ConnectionUnblocked{})
	}
}

// cleanup closes every channel (requeueing unacked messages, cancelling
// consumers) and deletes the connection's exclusive queues.
func (c *conn) cleanup(ctx context.Context) {
	c.chMu.Lock()
	chans := make([]*channel, 0, len(c.channels))
	for _, ch := range c.channels {
		chans = append(chans, ch)
	}
	c.channels = map[uint16]*channel{}
	c.chMu.Unlock()
	for _, ch := range chans {
		ch.shutdown()
	}
	if c.vh != nil {
		c.vh.ConnectionClosed(ctx, c.id)
	}
}

func (c *conn) info() ConnectionInfo {
	ci := ConnectionInfo{ID: c.id, Name: c.name, User: c.user, ConnectedAt: c.connectedAt, FrameMax: c.frameMax, ChannelMax: c.channelMax, Heartbeat: c.heartbeat, RecvOct: c.recvOct.Load(), SendOct: c.sendOct.Load()}
	if c.vh != nil {
		ci.Vhost = c.vh.Name()
	}
	if s, ok := c.state.Load().(string); ok {
		ci.State = s
	}
	if a, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		ci.PeerHost, ci.PeerPort = a.IP.String(), a.Port
	}
	if a, ok := c.nc.LocalAddr().(*net.TCPAddr); ok {
		ci.Host, ci.Port = a.IP.String(), a.Port
	}
	c.chMu.Lock()
	ci.Channels = len(c.channels)
	c.chMu.Unlock()
	ci.ClientProps = map[string]any(c.clientProps)
	return ci
}

func (c *conn) channelInfos() []ChannelInfo {
	c.chMu.Lock()
	defer c.chMu.Unlock()
	out := make([]ChannelInfo, 0, len(c.channels))
	for _, ch := range c.channels {
		out = append(out, ch.info())
	}
	return out
}
