package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/server"
	"github.com/warrenmq/warren/broker/tlstest"
)

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startTLSNode starts a node with both TLS listeners and a server
// certificate from ca, and returns it with the server's TLS settings.
func startTLSNode(t *testing.T, ca *tlstest.CA, opts ...func(*config.Config)) *brokertest.Node {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Issue(t, "warren", x509.ExtKeyUsageServerAuth)
	certFile, keyFile := writeFile(t, dir, "tls.crt", cert), writeFile(t, dir, "tls.key", key)
	return brokertest.Start(t, append([]func(*config.Config){func(c *config.Config) {
		c.AMQP.TLSListen = "127.0.0.1:0"
		c.Stream.TLSListen = "127.0.0.1:0"
		c.TLS.CertFile, c.TLS.KeyFile = certFile, keyFile
	}}, opts...)...)
}

func amqpsURL(n *brokertest.Node) string {
	return fmt.Sprintf("amqps://guest:guest@%s/%%2F", n.Addr(server.ListenerAMQPTLS))
}

// TestTLSAMQPPublishConsume: amqp091-go's DialTLS publishes with confirms
// and consumes over the AMQP TLS listener.
func TestTLSAMQPPublishConsume(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	n := startTLSNode(t, ca)
	conn, err := amqp091.DialTLS(amqpsURL(n), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatalf("DialTLS: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("tls-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const count = 500
	body := strings.Repeat("x", 10000) // bigger than one TLS record
	for i := 0; i < count; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", "tls-q", false, false, amqp091.Publishing{Body: []byte(fmt.Sprintf("%d-%s", i, body))})
		if err != nil {
			t.Fatal(err)
		}
		if i == count-1 {
			if ok, err := dc.WaitContext(t.Context()); err != nil || !ok {
				t.Fatalf("confirm: %v %v", ok, err)
			}
		}
	}
	if err := ch.Qos(50, 0, false); err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume("tls-q", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < count; i++ {
		select {
		case m := <-msgs:
			if want := fmt.Sprintf("%d-%s", i, body); string(m.Body) != want {
				t.Fatalf("message %d: got %d bytes starting %q", i, len(m.Body), m.Body[:8])
			}
			_ = m.Ack(false)
		case <-time.After(10 * time.Second):
			t.Fatalf("got %d of %d messages", i, count)
		}
	}
}

// TestTLSStreamPublishConsume: the stream Go client connects with
// rabbitmq-stream+tls://, publishes with confirms and consumes; its
// producer and consumer connections follow the metadata to the TLS port.
func TestTLSStreamPublishConsume(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	n := startTLSNode(t, ca)
	uri := fmt.Sprintf("rabbitmq-stream+tls://guest:guest@%s/%%2F", n.Addr(server.ListenerStreamTLS))
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri(uri).
		SetTLSConfig(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}))
	if err != nil {
		t.Fatalf("environment over TLS: %v", err)
	}
	defer env.Close()
	if err := env.DeclareStream("tls-s", nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer("tls-s", nil)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	confirms := p.NotifyPublishConfirmation()
	const count = 200
	for i := 0; i < count; i++ {
		if err := p.Send(streamamqp.NewMessage([]byte(fmt.Sprintf("m-%d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	confirmed := 0
	for confirmed < count {
		select {
		case cs := <-confirms:
			for _, c := range cs {
				if !c.IsConfirmed() {
					t.Fatalf("message not confirmed: %v", c)
				}
				confirmed++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d confirmed", confirmed, count)
		}
	}
	got := make(chan string, count)
	c, err := env.NewConsumer("tls-s", func(_ stream.ConsumerContext, m *streamamqp.Message) {
		got <- string(m.GetData())
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer c.Close()
	for i := 0; i < count; i++ {
		select {
		case b := <-got:
			if b != fmt.Sprintf("m-%d", i) {
				t.Fatalf("message %d: %q", i, b)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("consumed %d of %d", i, count)
		}
	}
	_ = p.Close()
}

// within fails the test if fn does not return within d; it returns fn's error.
func within(t *testing.T, d time.Duration, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: no answer after %s (hangs)", what, d)
		return nil
	}
}

// TestTLSRefusals: plain clients on TLS ports fail at once, clients that
// trust another CA are refused, and the plain listeners still work.
func TestTLSRefusals(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	n := startTLSNode(t, ca)
	other := tlstest.NewCA(t, "other CA")

	err := within(t, 5*time.Second, "plain AMQP on the TLS port", func() error {
		c, err := amqp091.Dial(fmt.Sprintf("amqp://guest:guest@%s/%%2F", n.Addr(server.ListenerAMQPTLS)))
		if err == nil {
			c.Close()
		}
		return err
	})
	if err == nil {
		t.Fatal("plain AMQP client connected to the TLS port")
	}
	err = within(t, 5*time.Second, "plain stream client on the TLS port", func() error {
		env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().
			SetUri(fmt.Sprintf("rabbitmq-stream://guest:guest@%s/%%2F", n.Addr(server.ListenerStreamTLS))).SetRPCTimeout(2 * time.Second))
		if err == nil {
			env.Close()
		}
		return err
	})
	if err == nil {
		t.Fatal("plain stream client connected to the TLS port")
	}
	// The stream client waits for its RPC timeout whatever happens; the
	// server itself closes a connection that does not speak TLS at once.
	for _, l := range []string{server.ListenerAMQPTLS, server.ListenerStreamTLS} {
		c, err := net.Dial("tcp", n.Addr(l).String())
		if err != nil {
			t.Fatal(err)
		}
		// A stream peer-properties request, as a plain client sends it.
		if _, err := c.Write([]byte{0, 0, 0, 12, 0, 17, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if k, err := c.Read(make([]byte, 64)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: plain TCP connection not closed: read %d bytes, %v", l, k, err)
		}
		c.Close()
	}

	err = within(t, 5*time.Second, "AMQP with a wrong CA", func() error {
		c, err := amqp091.DialTLS(amqpsURL(n), &tls.Config{RootCAs: other.Pool(), ServerName: "localhost"})
		if err == nil {
			c.Close()
		}
		return err
	})
	var unknown x509.UnknownAuthorityError
	if err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("AMQP with a wrong CA: %v, want %T", err, unknown)
	}
	err = within(t, 5*time.Second, "stream with a wrong CA", func() error {
		env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().
			SetUri(fmt.Sprintf("rabbitmq-stream+tls://guest:guest@%s/%%2F", n.Addr(server.ListenerStreamTLS))).
			SetTLSConfig(&tls.Config{RootCAs: other.Pool(), ServerName: "localhost"}).SetRPCTimeout(2 * time.Second))
		if err == nil {
			env.Close()
		}
		return err
	})
	if err == nil {
		t.Fatal("stream client with a wrong CA connected")
	}

	// The plain listeners are unchanged.
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("plain", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	// The HTTP API lists the TLS listeners under RabbitMQ's protocol names.
	var overview struct {
		Listeners []struct {
			Protocol string `json:"protocol"`
			Port     int    `json:"port"`
		} `json:"listeners"`
	}
	if code := n.API(t, http.MethodGet, "/api/overview", nil, &overview); code != http.StatusOK {
		t.Fatalf("GET /api/overview: status %d", code)
	}
	ports := map[string]int{}
	for _, l := range overview.Listeners {
		ports[l.Protocol] = l.Port
	}
	for proto, name := range map[string]string{"amqp/ssl": server.ListenerAMQPTLS, "stream/ssl": server.ListenerStreamTLS} {
		if want := n.Addr(name).(*net.TCPAddr).Port; ports[proto] != want {
			t.Errorf("overview listener %s: port %d, want %d (all: %v)", proto, ports[proto], want, ports)
		}
	}
}

// TestTLSVerifyPeer: with tls.verify_peer, a client without a certificate
// is refused and one with a certificate from tls.ca_file connects, on a
// TLS-only node (plain listeners off).
func TestTLSVerifyPeer(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	caFile := writeFile(t, t.TempDir(), "ca.crt", ca.PEM)
	n := startTLSNode(t, ca, func(c *config.Config) {
		c.TLS.CAFile, c.TLS.VerifyPeer = caFile, true
		c.AMQP.Listen, c.Stream.Listen = "", ""
	})
	if n.Addr(server.ListenerAMQP) != nil || n.Addr(server.ListenerStream) != nil {
		t.Fatal("plain listeners open with amqp.listen and stream.listen empty")
	}
	err := within(t, 5*time.Second, "AMQP without a client certificate", func() error {
		c, err := amqp091.DialTLS(amqpsURL(n), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
		if err == nil {
			c.Close()
		}
		return err
	})
	if err == nil {
		t.Fatal("client without a certificate connected with verify_peer")
	}
	certPEM, keyPEM := ca.Issue(t, "client", x509.ExtKeyUsageClientAuth)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := amqp091.DialTLS(amqpsURL(n), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("", false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	clientTLS := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{cert}}
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().
		SetUri(fmt.Sprintf("rabbitmq-stream+tls://guest:guest@%s/%%2F", n.Addr(server.ListenerStreamTLS))).SetTLSConfig(clientTLS))
	if err != nil {
		t.Fatalf("stream client with a certificate: %v", err)
	}
	defer env.Close()
	if err := env.DeclareStream("tls-only", nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer("tls-only", nil)
	if err != nil {
		t.Fatalf("producer on a TLS-only node (metadata must advertise the TLS port): %v", err)
	}
	_ = p.Close()
}

// A *tls.Conn must take the AMQP connection's writer-goroutine path, not
// the inline syscall.RawConn one (which would write plaintext under TLS).
func TestTLSConnIsNotSyscallConn(t *testing.T) {
	if _, ok := any(&tls.Conn{}).(syscall.Conn); ok {
		t.Fatal("*tls.Conn implements syscall.Conn: the AMQP inline write path would bypass TLS")
	}
}
