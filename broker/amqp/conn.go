package amqp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/sockio"
	"github.com/warrenmq/warren/broker/vhost"
)

type conn struct {
	srv  *Server
	id   uint64
	nc   net.Conn
	r    *wire.Reader
	name string

	connectedAt time.Time
	pubStats    pubStats // the reader's, added to srv.Counters per read batch
	statsCh     *channel // the channel with publish counts to flush (reader only)
	frameMax    uint32
	channelMax  uint16
	heartbeat   time.Duration
	user        string
	// impersonator: the user's tag lets it publish with any user_id.
	impersonator bool
	vh           *vhost.Vhost
	perm         meta.CompiledPermission
	clientProps  wire.Table
	capBlocked   atomic.Bool // client understands connection.blocked (read by alarm watchers during the handshake)
	capCancel    bool        // client understands server-sent basic.cancel

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
	// inflight is what the writer took from out and has not written yet
	// (under outMu; kept exact only while outputOver is set).
	inflight int
	// outputOver is set (under outMu) when out and inflight together
	// exceed Config.OutputBufferLimit, and cleared once the writer has
	// drained them to half of it: the reader, which loads it once per
	// frame, stops reading the client's frames meanwhile (waitOutput).
	// outputDrained wakes it.
	outputOver    atomic.Bool
	outputDrained chan struct{}
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

	flushFn     func()      // c.flush, bound once (a method value allocates): flushPublishes hands it to queues
	wroteInline atomic.Bool // flushInline wrote since the writer's last heartbeat check
	closeSent   atomic.Bool // we sent connection.close and wait for close-ok
	blockedNow  atomic.Bool // connection.blocked was sent
	state       atomic.Value
	recvOct     atomic.Uint64
	sendOct     atomic.Uint64
}

// readBufferSize is a connection's read buffer once the handshake is done;
// it grows beyond with larger frames, up to the frame max.
const readBufferSize = 64 << 10

func newConn(s *Server, id uint64, nc net.Conn) *conn {
	c := &conn{
		srv:           s,
		id:            id,
		nc:            nc,
		name:          fmt.Sprintf("%s -> %s", nc.RemoteAddr(), nc.LocalAddr()),
		connectedAt:   time.Now(),
		channels:      map[uint16]*channel{},
		outSignal:     make(chan struct{}, 1),
		outputDrained: make(chan struct{}, 1),
		done:          make(chan struct{}),
		stopWriting:   make(chan struct{}),
		writerDone:    make(chan struct{}),
	}
	if sock, err := sockio.New(nc, sockio.BusyPoll{
		For:      s.cfg.BusyPoll,
		Spinners: s.spinners,
		Want:     c.wantAcks.Load,
		TimedOut: func() { c.wantAcks.Store(false) },
	}); err == nil {
		c.sock = sock
		c.r = wire.NewReader(sock, wire.FrameMinSize)
	} else {
		c.r = wire.NewReader(nc, wire.FrameMinSize)
	}
	c.flushFn = c.flush
	c.acks.init()
	c.state.Store("starting")
	return c
}

func (c *conn) serve(ctx context.Context) {
	defer c.shutdownSocket()
	if err := c.safely("handshake", c.handshake); err != nil {
		c.srv.log.Debug("amqp handshake failed", "remote", c.nc.RemoteAddr(), "err", err)
		return
	}
	c.state.Store("running")
	// Small during the handshake (an unauthenticated connection holds a
	// few KiB), then large enough to read many frames per system call.
	c.r.Grow(readBufferSize)
	go c.writeLoop()
	err := c.safely("read loop", func() error { return c.readLoop(ctx) })
	c.state.Store("closing")
	c.pubStats.flush(&c.srv.Counters)
	c.flushChanStats()
	_ = c.flushPublishes(context.WithoutCancel(ctx))
	c.cleanup(ctx)
	c.acks.flush() // what cleanup settled
	c.acks.stop()
	c.logClosed(err)
	c.stopWriter()
}

// logClosed logs, at info as RabbitMQ does, the end of a connection that
// completed its handshake: who, which vhost, for how long, and why when
// the client did not close it with connection.close.
func (c *conn) logClosed(err error) {
	vhost := ""
	if c.vh != nil {
		vhost = c.vh.Name()
	}
	dur := time.Since(c.connectedAt).Round(time.Millisecond)
	head := fmt.Sprintf("closing AMQP connection (%s, vhost: '%s', user: '%s', duration: '%s')", c.name, vhost, c.user, dur)
	attrs := []any{"peer", c.peer(), "user", c.user, "vhost", vhost}
	switch {
	case err == nil || errors.Is(err, errClientClosed):
		c.srv.log.Info(head, attrs...)
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET):
		c.srv.log.Info(head+": client unexpectedly closed TCP connection", attrs...)
	default:
		c.srv.log.Info(head+": "+err.Error(), attrs...)
	}
}

func (c *conn) readLoop(ctx context.Context) error {
	var lastDeadline time.Time
	for frames := 0; ; frames++ {
		if c.outputOver.Load() {
			if err := c.waitOutput(ctx); err != nil {
				return err
			}
			if c.heartbeat > 0 { // the read deadline may have passed meanwhile
				lastDeadline = time.Now()
				_ = c.nc.SetReadDeadline(lastDeadline.Add(2 * c.heartbeat))
			}
		}
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
			c.pubStats.flush(&c.srv.Counters)
			c.flushChanStats()
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
			if fe := frameError(err, c.frameMax); fe != nil {
				c.closeWith(fe)
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

// safely runs fn, a stage of the connection's reader. A panic in it is a
// bug, and this is only the last line against it: logged at error with
// its stack, it ends this connection alone (the client gets an internal
// error, the reader's cleanup runs) instead of the process.
func (c *conn) safely(stage string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.srv.log.Error("amqp: recovered from a panic, closing the connection", "conn", c.name, "stage", stage, "panic", r, "stack", string(debug.Stack()))
			if stage != "handshake" {
				c.closeWith(newError(wire.InternalError, "internal error"))
			}
			err = fmt.Errorf("panic in %s: %v", stage, r)
		}
	}()
	return fn()
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
		return checkHeartbeat(f)
	case wire.FrameMethod, wire.FrameHeader, wire.FrameBody:
	default:
		return newError(wire.FrameError, "unknown frame type %d", f.Type)
	}
	if f.Channel == 0 {
		if f.Type != wire.FrameMethod {
			return newError(wire.UnexpectedFrame, "content frame on channel 0")
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
			// As RabbitMQ: a method of another class, or a handshake method
			// once the connection runs, on channel 0 is a channel error.
			return newError(wire.ChannelError, "unexpected method '%s' on channel 0 in connection state running", m.Name())
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
		c.srv.cfg.Churn.ChannelsOpened.Add(1)
		c.sendMethod(f.Channel, &wire.ChannelOpenOk{})
		return nil
	}
	return ch.handleFrame(ctx, f)
}

// frameError is the connection error for a frame the reader refused, or
// nil for an I/O error (nothing to tell the client).
func frameError(err error, frameMax uint32) *Error {
	switch {
	case errors.Is(err, wire.ErrFrameTooLarge):
		return newError(wire.FrameError, "frame size exceeds frame_max %d", frameMax)
	case errors.Is(err, wire.ErrBadFrameEnd), errors.Is(err, wire.ErrBadFrameType), errors.Is(err, wire.ErrMalformed):
		return newError(wire.FrameError, "malformed frame: %v", err)
	}
	return nil
}

// checkHeartbeat refuses a heartbeat frame that is not the empty frame
// on channel 0 the spec allows.
func checkHeartbeat(f wire.Frame) error {
	if f.Channel != 0 {
		return newError(wire.FrameError, "heartbeat frame on channel %d", f.Channel)
	}
	if len(f.Payload) != 0 {
		return newError(wire.FrameError, "heartbeat frame with a %d-byte payload", len(f.Payload))
	}
	return nil
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
	c.srv.cfg.Churn.ChannelsClosed.Add(uint64(len(chans)))
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
