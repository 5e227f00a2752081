package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/broker/counters"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/netaccept"
	"github.com/warrenmq/warren/broker/sockio"
	"github.com/warrenmq/warren/broker/vhost"
)

// Config holds the negotiated limits the server offers.
type Config struct {
	FrameMax         uint32
	ChannelMax       uint16
	Heartbeat        time.Duration
	HandshakeTimeout time.Duration
	// BusyPoll is how long a reader spins for an ack a starved consumer
	// waits for (see sockio.BusyPoll); 0 never spins.
	BusyPoll       time.Duration
	MaxMessageSize int64
	// OutputBufferLimit bounds the bytes a connection holds for its
	// client's socket (confirms, returns, replies, deliveries): over it
	// the reader stops reading the client's frames until the writer has
	// drained the output to half the limit (default 4 MiB; see
	// conn.waitOutput).
	OutputBufferLimit int
	// Product and Version are reported in connection.start's server-properties.
	Product, Version string
	// Churn (made when nil) counts connections and channels opened and closed.
	Churn *counters.Churn
}

// Backend is what the AMQP server needs from the broker.
type Backend interface {
	// Authenticate checks a user's password and whether it may connect from remote.
	Authenticate(user, password string, remote net.Addr) error
	// Vhost returns a running vhost.
	Vhost(name string) (*vhost.Vhost, bool)
	// Permission returns the user's permissions in a vhost.
	Permission(user, vhost string) (meta.Permission, bool)
	// UserTags returns the user's tags (an "impersonator" may publish
	// with another user's user_id property).
	UserTags(user string) []string
	// NewMessageID returns a node-unique message id.
	NewMessageID() uint64
}

// Server accepts AMQP connections.
type Server struct {
	cfg      Config
	backend  Backend
	log      *slog.Logger
	spinners *sockio.Spinners // shared by the connections' busy-polls

	Counters Counters
	xstats   exchangeStats // exchanges' message counters (ExchangeStats)

	replies replyRegistry // direct reply-to consumers by reply name

	nextID  atomic.Uint64
	mu      sync.Mutex
	conns   map[uint64]*conn
	closing bool
	// suspended: new connections are closed at once (Suspend, Resume).
	suspended bool
	wg        sync.WaitGroup
	blocked   atomic.Pointer[string] // non-nil: publishers are blocked for this reason
	// unblocked is closed when an alarm clears; replaced when one is raised.
	unblockMu sync.Mutex
	unblocked chan struct{}
}

// NewServer returns a server; call Serve to accept connections.
func NewServer(cfg Config, b Backend, log *slog.Logger) *Server {
	if cfg.FrameMax == 0 {
		cfg.FrameMax = 131072
	}
	if cfg.ChannelMax == 0 {
		cfg.ChannelMax = 2047
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.OutputBufferLimit == 0 {
		cfg.OutputBufferLimit = 4 << 20
	}
	if cfg.Churn == nil {
		cfg.Churn = &counters.Churn{}
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = 128 << 20
	}
	if cfg.Product == "" {
		cfg.Product = "Warren"
	}
	if log == nil {
		log = slog.Default()
	}
	unblocked := make(chan struct{})
	close(unblocked)
	return &Server{cfg: cfg, backend: b, log: log, conns: map[uint64]*conn{}, unblocked: unblocked, spinners: sockio.NewSpinners(0)}
}

// Serve accepts connections on ln until ctx is done or Shutdown is called.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return netaccept.Serve(ctx, ln, "amqp", func(nc net.Conn) {
		s.mu.Lock()
		if s.closing || s.suspended {
			s.mu.Unlock()
			_ = nc.Close()
			return
		}
		c := newConn(s, s.nextID.Add(1), nc)
		s.conns[c.id] = c
		s.wg.Add(1)
		s.mu.Unlock()
		s.cfg.Churn.ConnectionsOpened.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve(ctx)
			s.mu.Lock()
			delete(s.conns, c.id)
			s.mu.Unlock()
			s.cfg.Churn.ConnectionsClosed.Add(1)
		}()
	})
}

// Shutdown closes every connection with connection.close 320
// (CONNECTION_FORCED) and waits for them to finish, or for ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.forceClose("broker shutdown")
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("amqp: shutdown: %w", ctx.Err())
	}
}

// Suspend closes every connection, those still in their handshake too,
// with connection.close 320 (CONNECTION_FORCED) and reason, refuses new
// ones until Resume, and returns once the closed ones are gone (or ctx
// ends). A node joining a cluster suspends: no client may log in against
// its metadata while it is replaced.
func (s *Server) Suspend(ctx context.Context, reason string) error {
	err := netaccept.Suspend(ctx, &s.mu, func() []*conn {
		s.suspended = true
		return slices.Collect(maps.Values(s.conns))
	}, func(c *conn) { c.forceClose(reason) }, func(c *conn) bool { return s.conns[c.id] == c })
	if err != nil {
		return fmt.Errorf("amqp: suspend: %w", err)
	}
	return nil
}

// Resume takes new connections again after Suspend.
func (s *Server) Resume() {
	s.mu.Lock()
	s.suspended = false
	s.mu.Unlock()
}

// SetBlocked blocks (reason non-empty) or unblocks publishers: connections
// that announced the connection.blocked capability are told, and every
// connection stops reading while it is publishing under the alarm.
func (s *Server) SetBlocked(reason string) {
	s.unblockMu.Lock()
	if reason == "" {
		if s.blocked.Swap(nil) != nil {
			close(s.unblocked)
		}
	} else if s.blocked.Swap(&reason) == nil {
		s.unblocked = make(chan struct{})
	}
	s.unblockMu.Unlock()
	for _, c := range s.connList() {
		c.alarmChanged(reason)
	}
}

// ConnectionInfo describes one connection for the HTTP API.
type ConnectionInfo struct {
	ID          uint64
	Name        string
	User        string
	Vhost       string
	PeerHost    string
	PeerPort    int
	Host        string
	Port        int
	Channels    int
	State       string
	ConnectedAt time.Time
	ClientProps map[string]any
	FrameMax    uint32
	ChannelMax  uint16
	Heartbeat   time.Duration
	RecvOct     uint64
	SendOct     uint64
}

// ChannelInfo describes one channel for the HTTP API.
type ChannelInfo struct {
	Connection     string
	Number         uint16
	User, Vhost    string
	Consumers      int
	Unacked        int
	PrefetchCount  int
	GlobalPrefetch int
	Confirm        bool
	Transactional  bool
	UnconfirmedLen int
	// Stats are the channel's message counters.
	Stats MessageStats
	// Publisher is whether the channel has published.
	Publisher bool
}

// ConsumerInfo describes one consumer for the HTTP API.
type ConsumerInfo struct {
	Tag, Queue, Vhost string
	Connection        string // its connection's name
	Channel           uint16
	User              string
	AckRequired       bool
	Exclusive         bool
	Prefetch          int
	Args              map[string]any
}

// connList is the open connections, at the time of the call.
func (s *Server) connList() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// Consumers lists the consumers of every channel.
func (s *Server) Consumers() []ConsumerInfo {
	conns := s.connList()
	var out []ConsumerInfo
	for _, c := range conns {
		c.chMu.Lock()
		for _, ch := range c.channels {
			out = append(out, ch.consumerInfos()...)
		}
		c.chMu.Unlock()
	}
	return out
}

// Connections lists open connections, sorted by name: those past the
// handshake (whose fields the handshake no longer writes; the state's
// atomic store after it orders them before this read).
func (s *Server) Connections() []ConnectionInfo {
	conns := s.connList()
	out := make([]ConnectionInfo, 0, len(conns))
	for _, c := range conns {
		if st, _ := c.state.Load().(string); st == "starting" {
			continue
		}
		out = append(out, c.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Channels lists open channels.
func (s *Server) Channels() []ChannelInfo {
	conns := s.connList()
	var out []ChannelInfo
	for _, c := range conns {
		out = append(out, c.channelInfos()...)
	}
	return out
}

// ErrNoConnection is returned by CloseConnection for an unknown name.
var ErrNoConnection = errors.New("amqp: no such connection")

// CloseConnection closes a connection by name with CONNECTION_FORCED.
func (s *Server) CloseConnection(name, reason string) error {
	s.mu.Lock()
	var found *conn
	for _, c := range s.conns {
		if c.name == name {
			found = c
			break
		}
	}
	s.mu.Unlock()
	if found == nil {
		return fmt.Errorf("%w: %q", ErrNoConnection, name)
	}
	if reason == "" {
		reason = "Closed via management plugin"
	}
	found.forceClose(reason)
	return nil
}

// waitUnblocked blocks a publishing connection while an alarm is raised.
func (s *Server) waitUnblocked(ctx context.Context, done <-chan struct{}) error {
	if s.blocked.Load() == nil {
		return nil
	}
	s.unblockMu.Lock()
	ch := s.unblocked
	s.unblockMu.Unlock()
	select {
	case <-ch:
		return nil
	case <-done:
		return net.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}
