package server_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/server"
)

// closedWithin reports whether the server closes c within d (reading and
// discarding whatever it sends first), and after how long.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) (bool, time.Duration) {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(d))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false, time.Since(start)
	}
	return true, time.Since(start) // EOF or reset: the server closed it
}

// The HTTP API does not hold connections for clients that never finish: an
// idle kept-alive connection is closed after http.idle_timeout, and an
// unauthenticated request whose body trickles in is cut at
// http.read_timeout, while the client is still sending.
func TestProbeHTTPTimeouts(t *testing.T) {
	n := brokertest.Start(t, func(c *config.Config) {
		c.HTTP.IdleTimeout = 300 * time.Millisecond
		c.HTTP.ReadTimeout = 500 * time.Millisecond
	})
	addr := n.Addr(server.ListenerHTTP).String()
	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: warren\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 || resp.Close {
			t.Fatalf("first request: %v %v (close %v)", resp, err, resp != nil && resp.Close)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if closed, after := closedWithin(t, c, 5*time.Second); !closed {
			t.Fatalf("an idle kept-alive connection is still open after %v", after)
		}
	})

	t.Run("trickled unauthenticated body", func(t *testing.T) {
		c := dial(t)
		if _, err := io.WriteString(c, "PUT /api/vhosts/slow HTTP/1.1\r\nHost: warren\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		go func() { // one byte every 50 ms, until the server gives up
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		if closed, after := closedWithin(t, c, 5*time.Second); !closed {
			t.Fatalf("a trickling unauthenticated request is still open after %v", after)
		}
	})
}

// The HTTP API's listener holds at most http.max_connections connections:
// one more is answered 503 (or just closed) at once and never served, while
// AMQP still accepts clients; once a connection closes, the API serves again.
func TestProbeHTTPConnectionLimit(t *testing.T) {
	const limit = 4
	n := brokertest.Start(t, func(c *config.Config) { c.HTTP.MaxConnections = limit })
	addr := n.Addr(server.ListenerHTTP).String()
	var held []net.Conn
	for i := 0; i < limit; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Each held connection has been accepted once a request on it is
	// answered; they stay open (keep-alive).
	for _, c := range held {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: warren\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("a connection under the limit: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}

	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, err := io.ReadAll(over)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection over the limit is held open (got %q)", answer)
	}
	if len(answer) > 0 && !strings.HasPrefix(string(answer), "HTTP/1.1 503") {
		t.Fatalf("a connection over the limit was answered %q, want 503", answer)
	}

	conn, err := amqp091.Dial(n.URL())
	if err != nil {
		t.Fatalf("AMQP refused while the HTTP API is at its limit: %v", err)
	}
	_ = conn.Close()

	_ = held[0].Close()
	eventually.Succeeds(t, 5*time.Second, "the API serves again once a connection closed", func() error {
		resp, err := http.Get(n.HTTPURL() + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return errors.New(resp.Status)
		}
		return nil
	})
}
