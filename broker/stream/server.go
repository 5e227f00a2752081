package stream

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/broker/counters"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/netaccept"
	"github.com/warrenmq/warren/broker/stream/proto"
	"github.com/warrenmq/warren/broker/vhost"
)

// Backend is what the server needs from the node.
type Backend interface {
	// Authenticate checks a user's password and whether it may connect from remote.
	Authenticate(user, password string, remote net.Addr) error
	// Vhost returns a running vhost.
	Vhost(name string) (*vhost.Vhost, bool)
	// Permission returns the user's permissions in a vhost.
	Permission(user, vhost string) (meta.Permission, bool)
}

// Config configures the stream protocol server.
type Config struct {
	// FrameMax is the largest frame the server accepts and proposes in tune
	// (default 1 MiB).
	FrameMax uint32
	// InitialFrameMax bounds frames before open succeeds (default 8192, as
	// RabbitMQ's stream.initial_frame_max): an unauthenticated client
	// cannot make the server buffer more.
	InitialFrameMax uint32
	// Heartbeat is the proposed heartbeat interval (default 60s; 0 after
	// negotiation disables heartbeats).
	Heartbeat time.Duration
	// AdvertisedHost and AdvertisedPort go into open and metadata responses;
	// empty/0 means the listener's host (its IP when bound to one, else the
	// node's hostname) and port.
	AdvertisedHost string
	AdvertisedPort int
	// AdvertisedTLSPort is the port given to clients connected over TLS
	// (ServeTLS); 0 means the TLS listener's port.
	AdvertisedTLSPort int
	// HandshakeTimeout bounds the time from accept to open.
	HandshakeTimeout time.Duration
	// Product and Version are sent as peer properties. Version must look like
	// a RabbitMQ version (clients enable features by it); WarrenVersion is
	// sent as warren_version.
	Product, Version, WarrenVersion string
	// OutputBufferBytes bounds a connection's queued output: deliveries wait
	// while it is fuller (default 4 MiB).
	OutputBufferBytes int
	// Churn (made when nil) counts connections opened and closed.
	Churn *counters.Churn
	// Nodes reaches the other members of the node's cluster: metadata
	// names the member holding a stream by the address it advertises
	// (cluster.go). Nil: every stream is this node's.
	Nodes Nodes
}

// ProtocolVersion is the RabbitMQ version whose stream protocol the server
// speaks, sent as the "version" peer property: the official clients turn
// features (single active consumer, filtering, super stream commands) on by
// this version.
const ProtocolVersion = "4.2.0"

// Counters are the server's cumulative counters.
type Counters struct {
	Published, Confirmed, Duplicates, Delivered, ChunksDelivered atomic.Uint64
	// Errors counts the error codes the server answered or closed with,
	// by code (proto.CodeStreamDoesNotExist ... proto.CodePublisherDoesNotExist),
	// as RabbitMQ's rabbitmq_global_stream_error_*_total.
	Errors [proto.CodePublisherDoesNotExist + 1]atomic.Uint64
}

// countError counts an error code sent to a client (not OK, not no-offset).
func (c *Counters) countError(code uint16) {
	if code > proto.CodeOK && int(code) < len(c.Errors) {
		c.Errors[code].Add(1)
	}
}

// Server accepts stream protocol connections.
type Server struct {
	cfg     Config
	backend Backend
	log     *slog.Logger

	Counters Counters

	advMu      sync.Mutex
	advHost    string
	advPort    int
	advTLSPort int

	reg registry
	eps endpoints

	// Resource alarm: while blocked is set, publishing connections are not
	// read; unblocked is closed when the alarm clears.
	alarmMu   sync.Mutex
	blocked   atomic.Pointer[string]
	unblocked chan struct{}

	mu      sync.Mutex
	conns   map[*conn]struct{}
	closing bool
	// suspended: new connections are closed at once (Suspend, Resume).
	suspended bool
	wg        sync.WaitGroup
}

// NewServer returns a server; call Serve to accept connections.
func NewServer(cfg Config, b Backend, log *slog.Logger) *Server {
	if cfg.FrameMax == 0 {
		cfg.FrameMax = 1 << 20
	}
	if cfg.InitialFrameMax == 0 {
		cfg.InitialFrameMax = 8192
	}
	if cfg.Heartbeat < 0 {
		cfg.Heartbeat = 0
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.Product == "" {
		cfg.Product = "Warren"
	}
	if cfg.Version == "" {
		cfg.Version = ProtocolVersion
	}
	if cfg.OutputBufferBytes <= 0 {
		cfg.OutputBufferBytes = 4 << 20
	}
	if cfg.Churn == nil {
		cfg.Churn = &counters.Churn{}
	}
	if log == nil {
		log = slog.Default()
	}
	unblocked := make(chan struct{})
	close(unblocked)
	s := &Server{cfg: cfg, backend: b, log: log, conns: map[*conn]struct{}{}, unblocked: unblocked}
	s.reg.init(s)
	if cfg.Nodes != nil {
		cfg.Nodes.HandleNode(methodEndpoint, s.answerEndpoint)
	}
	return s
}

// advertised returns the host and port given to clients, the TLS
// listener's port for clients connected over TLS.
func (s *Server) advertised(overTLS bool) (string, int) {
	s.advMu.Lock()
	defer s.advMu.Unlock()
	if overTLS {
		return s.advHost, s.advTLSPort
	}
	return s.advHost, s.advPort
}

func (s *Server) setAdvertised(ln net.Listener) {
	host, port := s.cfg.AdvertisedHost, s.cfg.AdvertisedPort
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		if host == "" && a.IP != nil && !a.IP.IsUnspecified() {
			host = a.IP.String()
		}
		if port == 0 {
			port = a.Port
		}
	}
	if host == "" {
		host, _ = os.Hostname()
		if host == "" {
			host = "localhost"
		}
	}
	s.advMu.Lock()
	s.advHost, s.advPort = host, port
	s.advMu.Unlock()
}

// Serve accepts connections on ln until ctx is done or ln is closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.setAdvertised(ln)
	return s.serve(ctx, ln, false)
}

// ServeTLS accepts TLS connections on the TCP listener ln, with cfg, until
// ctx is done or ln is closed. Metadata sent on these connections
// advertises ln's port (or Config.AdvertisedTLSPort); the host is the one
// Serve advertises when it runs too, else ln's.
func (s *Server) ServeTLS(ctx context.Context, ln net.Listener, cfg *tls.Config) error {
	port := s.cfg.AdvertisedTLSPort
	if a, ok := ln.Addr().(*net.TCPAddr); ok && port == 0 {
		port = a.Port
	}
	s.advMu.Lock()
	s.advTLSPort = port
	host := s.advHost
	s.advMu.Unlock()
	if host == "" {
		// No plain listener (yet): take the host from this one.
		s.setAdvertisedHost(ln)
	}
	return s.serve(ctx, tls.NewListener(ln, cfg), true)
}

func (s *Server) setAdvertisedHost(ln net.Listener) {
	s.advMu.Lock()
	port := s.advPort
	s.advMu.Unlock()
	s.setAdvertised(ln)
	s.advMu.Lock()
	s.advPort = port
	s.advMu.Unlock()
}

func (s *Server) serve(ctx context.Context, ln net.Listener, overTLS bool) error {
	return netaccept.Serve(ctx, ln, "stream", func(nc net.Conn) {
		s.mu.Lock()
		if s.closing || s.suspended {
			s.mu.Unlock()
			_ = nc.Close()
			return
		}
		c := newConn(s, nc)
		c.overTLS = overTLS
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.cfg.Churn.ConnectionsOpened.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve(ctx)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.cfg.Churn.ConnectionsClosed.Add(1)
		}()
	})
}

// Shutdown closes every connection (close with code OK, "broker shutdown")
// and waits for them, or for ctx. Stream writers flush what they hold.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.closeWith(codeOK, "broker shutdown")
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		s.reg.stopAll()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stream: shutdown: %w", ctx.Err())
	}
}

// Suspend closes every connection, those still in their handshake too
// (close with code OK and reason), refuses new ones until Resume, and
// returns once the closed ones are gone (or ctx ends): see amqp's.
func (s *Server) Suspend(ctx context.Context, reason string) error {
	err := netaccept.Suspend(ctx, &s.mu, func() []*conn {
		s.suspended = true
		return slices.Collect(maps.Keys(s.conns))
	}, func(c *conn) { c.closeWith(codeOK, reason) }, func(c *conn) bool {
		_, ok := s.conns[c]
		return ok
	})
	if err != nil {
		return fmt.Errorf("stream: suspend: %w", err)
	}
	return nil
}

// Resume takes new connections again after Suspend.
func (s *Server) Resume() {
	s.mu.Lock()
	s.suspended = false
	s.mu.Unlock()
}

// SetBlocked raises (reason non-empty) or clears a resource alarm. While
// it is raised, a connection that sends a publish frame is not read any
// further (TCP holds the publisher back) until the alarm clears.
func (s *Server) SetBlocked(reason string) {
	s.alarmMu.Lock()
	defer s.alarmMu.Unlock()
	if reason == "" {
		if s.blocked.Swap(nil) != nil {
			close(s.unblocked)
		}
		return
	}
	if s.blocked.Swap(&reason) == nil {
		s.unblocked = make(chan struct{})
	}
}

// unblockedCh returns a channel closed once no alarm is raised.
func (s *Server) unblockedCh() <-chan struct{} {
	s.alarmMu.Lock()
	defer s.alarmMu.Unlock()
	return s.unblocked
}

// CloseVhost closes the connections open on a vhost (it is being
// deleted), with a close request carrying reason.
func (s *Server) CloseVhost(vhost, reason string) {
	s.mu.Lock()
	var conns []*conn
	for c := range s.conns {
		if v := c.vhost.Load(); v != nil && *v == vhost {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.closeWith(proto.CodeVirtualHostAccessFailure, reason)
	}
}

// ConnectionCount is the number of open connections.
func (s *Server) ConnectionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// PublishersConsumers counts the declared publishers and the
// subscriptions of every connection.
func (s *Server) PublishersConsumers() (publishers, consumers int) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns { // c.mu is never taken under s.mu
		c.mu.Lock()
		publishers += len(c.publishers)
		consumers += len(c.subs)
		c.mu.Unlock()
	}
	return publishers, consumers
}
