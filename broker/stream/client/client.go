package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/warren/broker/stream/proto"
)

// Options configure a connection.
type Options struct {
	// OnConfirm receives publish confirms (ids alias a read buffer).
	OnConfirm func(publisherID uint8, ids []uint64)
	// OnPublishError receives refused publishing ids.
	OnPublishError func(publisherID uint8, errs []proto.PublishingError)
	// OnDeliver receives each deliver frame: the subscription and the chunk
	// (header and data, aliasing a read buffer valid during the call).
	OnDeliver func(subscriptionID uint8, chunk []byte)
	// Heartbeat asked for in tune (0: none).
	Heartbeat time.Duration
	// SocketBuffer sets the socket's send and receive buffers (0: system default).
	SocketBuffer int
}

// Error is a response code other than OK.
type Error struct {
	Key  uint16
	Code uint16
}

func (e *Error) Error() string {
	return fmt.Sprintf("stream: command %d: %s (code %d)", e.Key, proto.CodeText(e.Code), e.Code)
}

// ErrClosed is returned once the connection is closed.
var ErrClosed = errors.New("stream client: connection closed")

// Conn is a stream protocol connection.
type Conn struct {
	nc   net.Conn
	br   *bufio.Reader
	opts Options

	wmu sync.Mutex
	bw  *bufio.Writer
	buf []byte

	mu      sync.Mutex
	corr    uint32
	waiting map[uint32]chan proto.Command
	err     error
	done    chan struct{}
}

// Dial connects to uri (rabbitmq-stream://user:pass@host:port/vhost, vhost
// URL-escaped; %2f is "/") and opens the vhost.
func Dial(ctx context.Context, uri string, opts Options) (*Conn, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("stream client: parse %q: %w", uri, err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5552")
	}
	user, pass := "guest", "guest"
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok {
			pass = p
		}
	}
	vhost := "/"
	if p := strings.TrimPrefix(u.EscapedPath(), "/"); p != "" {
		if vhost, err = url.PathUnescape(p); err != nil {
			return nil, fmt.Errorf("stream client: vhost in %q: %w", uri, err)
		}
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("stream client: dial %s: %w", host, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok && opts.SocketBuffer > 0 {
		_ = tc.SetReadBuffer(opts.SocketBuffer)
		_ = tc.SetWriteBuffer(opts.SocketBuffer)
	}
	c := &Conn{nc: nc, br: bufio.NewReaderSize(nc, 1<<20), bw: bufio.NewWriterSize(nc, 1<<20), opts: opts,
		waiting: map[uint32]chan proto.Command{}, done: make(chan struct{})}
	if err := c.handshake(ctx, user, pass, vhost); err != nil {
		_ = nc.Close()
		return nil, err
	}
	go c.readLoop()
	return c, nil
}

// handshake runs synchronously, before the reader goroutine starts.
func (c *Conn) handshake(ctx context.Context, user, pass, vhost string) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetDeadline(dl)
		defer c.nc.SetDeadline(time.Time{})
	}
	recv := func() (proto.Command, error) {
		for {
			body, err := proto.ReadFrame(c.br, nil, 0)
			if err != nil {
				return nil, fmt.Errorf("stream client: handshake: %w", err)
			}
			cmd, err := proto.Decode(body)
			if err != nil {
				return nil, fmt.Errorf("stream client: handshake: %w", err)
			}
			if _, hb := cmd.(*proto.Heartbeat); !hb {
				return cmd, nil
			}
		}
	}
	steps := []proto.Command{
		&proto.PeerProperties{CorrelationID: 1, Properties: map[string]string{"product": "warren-perf", "connection_name": "warren-perf"}},
		&proto.SaslHandshake{CorrelationID: 2},
		&proto.SaslAuthenticate{CorrelationID: 3, Mechanism: "PLAIN", Data: []byte("\x00" + user + "\x00" + pass)},
	}
	for _, s := range steps {
		if err := c.write(s); err != nil {
			return err
		}
		resp, err := recv()
		if err != nil {
			return err
		}
		if code := responseCode(resp); code != proto.CodeOK {
			return &Error{Key: s.Key(), Code: code}
		}
	}
	tune, err := recv()
	if err != nil {
		return err
	}
	t, ok := tune.(*proto.Tune)
	if !ok {
		return fmt.Errorf("stream client: expected tune, got %T", tune)
	}
	hb := uint32(c.opts.Heartbeat / time.Second)
	if t.Heartbeat != 0 && (hb == 0 || t.Heartbeat < hb) {
		hb = t.Heartbeat
	}
	if err := c.write(&proto.Tune{Response: true, FrameMax: t.FrameMax, Heartbeat: hb}); err != nil {
		return err
	}
	if err := c.write(&proto.Open{CorrelationID: 4, Vhost: vhost}); err != nil {
		return err
	}
	resp, err := recv()
	if err != nil {
		return err
	}
	if code := responseCode(resp); code != proto.CodeOK {
		return &Error{Key: proto.KeyOpen, Code: code}
	}
	c.corr = 4
	return nil
}

func responseCode(c proto.Command) uint16 {
	switch m := c.(type) {
	case *proto.Response:
		return m.Code
	case *proto.PeerPropertiesResponse:
		return m.Code
	case *proto.SaslHandshakeResponse:
		return m.Code
	case *proto.OpenResponse:
		return m.Code
	case *proto.QueryOffsetResponse:
		return m.Code
	case *proto.QueryPublisherSequenceResponse:
		return m.Code
	case *proto.StreamStatsResponse:
		return m.Code
	case *proto.StreamsResponse:
		return m.Code
	case *proto.ExchangeVersionsResponse:
		return m.Code
	}
	return proto.CodeOK
}

func (c *Conn) write(cmd proto.Command) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.buf = proto.Encode(c.buf[:0], cmd)
	if _, err := c.bw.Write(c.buf); err != nil {
		return err
	}
	return c.bw.Flush()
}

// WriteFrame writes an encoded frame (size prefix included) and flushes.
func (c *Conn) WriteFrame(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.bw.Write(frame); err != nil {
		return err
	}
	return c.bw.Flush()
}

func (c *Conn) readLoop() {
	var buf []byte
	var err error
	defer func() {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
			if c.err == nil {
				c.err = ErrClosed
			}
		}
		for id, ch := range c.waiting {
			close(ch)
			delete(c.waiting, id)
		}
		c.mu.Unlock()
		close(c.done)
	}()
	for {
		var body []byte
		body, err = proto.ReadFrame(c.br, buf, 0)
		if err != nil {
			return
		}
		if cap(body) <= 8<<20 {
			buf = body[:0]
		}
		key, _, _ := proto.Header(body)
		switch key {
		case proto.KeyDeliver:
			if c.opts.OnDeliver != nil && len(body) > 5 {
				ver := binary.BigEndian.Uint16(body[2:4])
				off := 5
				if ver >= 2 {
					off += 8
				}
				if len(body) >= off+proto.ChunkHeaderSize {
					c.opts.OnDeliver(body[4], body[off:])
				}
			}
			continue
		case proto.KeyPublishConfirm:
			var pc proto.PublishConfirm
			cmd, derr := proto.Decode(body)
			if derr == nil {
				pc = *cmd.(*proto.PublishConfirm)
				if c.opts.OnConfirm != nil {
					c.opts.OnConfirm(pc.PublisherID, pc.PublishingIDs)
				}
			}
			continue
		}
		cmd, derr := proto.Decode(body)
		if derr != nil {
			err = derr
			return
		}
		switch m := cmd.(type) {
		case *proto.Heartbeat:
			_ = c.write(&proto.Heartbeat{})
		case *proto.PublishError:
			if c.opts.OnPublishError != nil {
				c.opts.OnPublishError(m.PublisherID, m.Errors)
			}
		case *proto.Close:
			_ = c.write(&proto.Response{For: proto.KeyClose, CorrelationID: m.CorrelationID, Code: proto.CodeOK})
			err = fmt.Errorf("stream client: closed by server: %s (code %d)", m.Reason, m.Code)
			return
		case *proto.ConsumerUpdate:
			_ = c.write(&proto.ConsumerUpdateResponse{CorrelationID: m.CorrelationID, Code: proto.CodeOK, Offset: proto.OffsetSpec{Type: proto.OffsetNext}})
		case *proto.MetadataUpdate, *proto.CreditResponse:
		default:
			if id, ok := correlation(cmd); ok {
				c.mu.Lock()
				ch := c.waiting[id]
				delete(c.waiting, id)
				c.mu.Unlock()
				if ch != nil {
					ch <- cmd
				}
			}
		}
	}
}

func correlation(c proto.Command) (uint32, bool) {
	switch m := c.(type) {
	case *proto.Response:
		return m.CorrelationID, true
	case *proto.MetadataResponse:
		return m.CorrelationID, true
	case *proto.QueryOffsetResponse:
		return m.CorrelationID, true
	case *proto.QueryPublisherSequenceResponse:
		return m.CorrelationID, true
	case *proto.StreamStatsResponse:
		return m.CorrelationID, true
	case *proto.StreamsResponse:
		return m.CorrelationID, true
	case *proto.ExchangeVersionsResponse:
		return m.CorrelationID, true
	}
	return 0, false
}

// call sends a request built with a fresh correlation id and waits for
// its response.
func (c *Conn) call(ctx context.Context, build func(corr uint32) proto.Command) (proto.Command, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.corr++
	id := c.corr
	ch := make(chan proto.Command, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	req := build(id)
	if err := c.write(req); err != nil {
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, c.Err()
		}
		if code := responseCode(resp); code != proto.CodeOK {
			return resp, &Error{Key: req.Key(), Code: code}
		}
		return resp, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Err is why the connection ended (nil while open).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when the connection ends.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the connection (politely, then the socket).
func (c *Conn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = c.call(ctx, func(id uint32) proto.Command {
		return &proto.Close{CorrelationID: id, Code: proto.CodeOK, Reason: "bye"}
	})
	return c.nc.Close()
}

// CreateStream creates a stream; an existing one is not an error when
// ifMissing is set.
func (c *Conn) CreateStream(ctx context.Context, name string, args map[string]string, ifMissing bool) error {
	_, err := c.call(ctx, func(id uint32) proto.Command {
		return &proto.CreateStream{CorrelationID: id, Stream: name, Arguments: args}
	})
	var e *Error
	if ifMissing && errors.As(err, &e) && e.Code == proto.CodeStreamAlreadyExists {
		return nil
	}
	return err
}

// DeleteStream deletes a stream.
func (c *Conn) DeleteStream(ctx context.Context, name string) error {
	_, err := c.call(ctx, func(id uint32) proto.Command { return &proto.DeleteStream{CorrelationID: id, Stream: name} })
	return err
}

// DeclarePublisher declares publisher id on stream (ref "" for none).
func (c *Conn) DeclarePublisher(ctx context.Context, id uint8, ref, stream string) error {
	_, err := c.call(ctx, func(corr uint32) proto.Command {
		return &proto.DeclarePublisher{CorrelationID: corr, PublisherID: id, Reference: ref, Stream: stream}
	})
	return err
}

// Subscribe subscribes id to stream from offset with initial credit.
func (c *Conn) Subscribe(ctx context.Context, id uint8, stream string, offset proto.OffsetSpec, credit uint16, props map[string]string) error {
	_, err := c.call(ctx, func(corr uint32) proto.Command {
		return &proto.Subscribe{CorrelationID: corr, SubscriptionID: id, Stream: stream, Offset: offset, Credit: credit, Properties: props}
	})
	return err
}

// Credit grants a subscription more chunks.
func (c *Conn) Credit(id uint8, n uint16) error {
	return c.write(&proto.Credit{SubscriptionID: id, Credit: n})
}

// StreamStats returns a stream's statistics.
func (c *Conn) StreamStats(ctx context.Context, stream string) (map[string]int64, error) {
	resp, err := c.call(ctx, func(id uint32) proto.Command { return &proto.StreamStats{CorrelationID: id, Stream: stream} })
	if err != nil {
		return nil, err
	}
	return resp.(*proto.StreamStatsResponse).Stats, nil
}

// ExchangeVersions tells the server which command versions this client
// takes (deliver v2 when v2 is set).
func (c *Conn) ExchangeVersions(ctx context.Context, v2 bool) error {
	mx := uint16(1)
	if v2 {
		mx = 2
	}
	_, err := c.call(ctx, func(id uint32) proto.Command {
		return &proto.ExchangeVersions{CorrelationID: id, Commands: []proto.CommandVersion{{Key: proto.KeyDeliver, Min: 1, Max: mx}, {Key: proto.KeyPublish, Min: 1, Max: 2}}}
	})
	return err
}
