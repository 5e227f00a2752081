// Package brokertest starts real Warren nodes for tests: in-process on
// loopback ports chosen by the kernel, with their data in a test temp dir, and
// stopped by t.Cleanup. Tests talk to them over real sockets with the
// official clients.
package brokertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/server"
)

// Node is a running in-process broker.
type Node struct {
	*server.Broker
	Cfg config.Config
	t   testing.TB
}

// Config returns a test configuration rooted at dir: every listener on
// 127.0.0.1 with a kernel-chosen port.
func Config(dir string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Cluster.NodeName = "warren@test"
	cfg.AMQP.Listen = "127.0.0.1:0"
	cfg.Stream.Listen = "127.0.0.1:0"
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Prometheus.Listen = "127.0.0.1:0"
	cfg.Cluster.Listen = "127.0.0.1:0"
	// Tests never read or make the user's default secret file.
	cfg.Cluster.Secret = "warren-test-cluster-secret"
	return cfg
}

// Start runs a node with Config(t.TempDir()) changed by opts.
func Start(t testing.TB, opts ...func(*config.Config)) *Node {
	t.Helper()
	cfg := Config(t.TempDir())
	for _, o := range opts {
		o(&cfg)
	}
	return StartConfig(t, cfg)
}

// StartConfig runs a node with cfg.
func StartConfig(t testing.TB, cfg config.Config) *Node {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("WARREN_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return StartConfigLog(t, cfg, log)
}

// StartConfigLog runs a node with cfg that logs to log (a test reads what
// the broker said through broker/brokertest/logcapture).
func StartConfigLog(t testing.TB, cfg config.Config, log *slog.Logger) *Node {
	t.Helper()
	ctx := context.Background()
	b, err := server.New(ctx, cfg, log)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	if err := b.Start(ctx); err != nil {
		_ = b.Shutdown(ctx)
		t.Fatalf("start listeners: %v", err)
	}
	n := &Node{Broker: b, Cfg: cfg, t: t}
	t.Cleanup(func() { n.Stop() })
	return n
}

// Stop shuts the node down cleanly (idempotent).
func (n *Node) Stop() {
	if n.Broker == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Broker.Shutdown(ctx); err != nil {
		n.t.Errorf("shutdown: %v", err)
	}
	n.Broker = nil
}

// Restart stops the node cleanly and starts a new one on the same data dir
// (listeners get new ports).
func (n *Node) Restart() *Node {
	n.t.Helper()
	n.Stop()
	return StartConfig(n.t, n.Cfg)
}

// URL is the AMQP URL for user guest on vhost "/".
func (n *Node) URL() string { return n.URLFor("guest", "guest", "/") }

// URLFor is the AMQP URL for a user and vhost.
func (n *Node) URLFor(user, pass, vhost string) string {
	return fmt.Sprintf("amqp://%s:%s@%s/%s", user, pass, n.Addr(server.ListenerAMQP), escapeVhost(vhost))
}

// HTTPURL is the management API base URL ("" when not listening).
func (n *Node) HTTPURL() string {
	if a := n.Addr(server.ListenerHTTP); a != nil {
		return "http://" + a.String()
	}
	return ""
}

// StreamAddr is the stream protocol listener's host:port.
func (n *Node) StreamAddr() string { return n.Addr(server.ListenerStream).String() }

// StreamURI is the stream protocol URI for user guest on vhost "/".
func (n *Node) StreamURI() string { return n.StreamURIFor("guest", "guest", "/") }

// StreamURIFor is the stream protocol URI for a user and vhost.
func (n *Node) StreamURIFor(user, pass, vhost string) string {
	return fmt.Sprintf("rabbitmq-stream://%s:%s@%s/%s", user, pass, n.StreamAddr(), escapeVhost(vhost))
}

// AMQPAddr is the AMQP listener's host:port.
func (n *Node) AMQPAddr() string { return n.Addr(server.ListenerAMQP).String() }

// escapeVhost is a vhost as the path of an AMQP or stream URI: every byte
// but unreserved ones percent-encoded, so "/" is "%2F" and "a b" "a%20b".
func escapeVhost(v string) string { return url.PathEscape(v) }

// Dial opens an AMQP connection as guest to vhost "/", closed at cleanup.
func (n *Node) Dial(t testing.TB) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.Dial(n.URL())
	if err != nil {
		t.Fatalf("dial %s: %v", n.URL(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Channel opens a connection and a channel on it.
func (n *Node) Channel(t testing.TB) *amqp091.Channel {
	t.Helper()
	ch, err := n.Dial(t).Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	return ch
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
