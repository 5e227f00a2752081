package server_test

import (
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/brokertest/logcapture"
	"github.com/warrenmq/warren/broker/server"
)

// logLine is what a test expects the broker to have logged at info: a
// message with these parts, and these attributes (a value ending in ':'
// is a prefix: the peer's port is the kernel's choice).
type logLine struct {
	msg   []string
	attrs map[string]string
}

func (w logLine) matches(l logcapture.Line) bool {
	if l.Level != slog.LevelInfo {
		return false
	}
	for _, part := range w.msg {
		if !strings.Contains(l.Msg, part) {
			return false
		}
	}
	for k, v := range w.attrs {
		got, ok := l.Attrs[k]
		if !ok || (strings.HasSuffix(v, ":") && !strings.HasPrefix(got, v)) || (!strings.HasSuffix(v, ":") && got != v) {
			return false
		}
	}
	return true
}

// waitLogged waits until the broker logged a line like want.
func waitLogged(t *testing.T, logs *logcapture.Log, want logLine) {
	t.Helper()
	eventually.True(t, 5*time.Second, "the broker logs "+strings.Join(want.msg, " ... "), func() bool {
		for _, l := range logs.Lines(slog.LevelDebug) {
			if want.matches(l) {
				return true
			}
		}
		return false
	})
}

// TestConnectionLogs checks what an operator reads in the log, at info and
// in RabbitMQ's words: a connection accepted, authenticated and closed,
// and each refused login with its reason and the peer's address, over
// AMQP and the stream protocol.
func TestConnectionLogs(t *testing.T) {
	ip := nonLoopbackIP(t)
	logs, log := logcapture.New()
	cfg := brokertest.Config(t.TempDir())
	cfg.AMQP.Listen, cfg.Stream.Listen = ":0", ":0"
	cfg.Stream.AdvertisedHost = "127.0.0.1"
	n := brokertest.StartConfigLog(t, cfg, log)
	if code := n.API(t, "PUT", "/api/users/app", map[string]any{"password": "app-pw", "tags": ""}, nil); code != 201 {
		t.Fatalf("create user app: %d", code)
	}
	amqpPort := strconv.Itoa(n.Addr(server.ListenerAMQP).(*net.TCPAddr).Port)
	streamPort := strconv.Itoa(n.Addr(server.ListenerStream).(*net.TCPAddr).Port)
	dial := func(host, user, pass, vhost string) (*amqp091.Connection, error) {
		return amqp091.Dial("amqp://" + user + ":" + pass + "@" + net.JoinHostPort(host, amqpPort) + "/" + strings.ReplaceAll(vhost, "/", "%2F"))
	}

	t.Run("accepted and closed", func(t *testing.T) {
		c, err := dial("127.0.0.1", "guest", "guest", "/")
		if err != nil {
			t.Fatal(err)
		}
		peer := c.LocalAddr().String()
		waitLogged(t, logs, logLine{msg: []string{"accepting AMQP connection " + peer + " -> "}, attrs: map[string]string{"peer": peer}})
		waitLogged(t, logs, logLine{msg: []string{"connection " + peer + " -> ", ": user 'guest' authenticated and granted access to vhost '/'"},
			attrs: map[string]string{"peer": peer, "user": "guest", "vhost": "/"}})
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		waitLogged(t, logs, logLine{msg: []string{"closing AMQP connection (" + peer + " -> ", "vhost: '/', user: 'guest', duration: '"},
			attrs: map[string]string{"peer": peer, "user": "guest", "vhost": "/"}})
	})

	refusals := []struct {
		name, host, user, pass, vhost string
		reason                        string
		msg                           string
	}{
		{"unknown user", "127.0.0.1", "nobody", "pw", "/", "unknown user", "PLAIN login refused: user 'nobody' - invalid credentials"},
		{"wrong password", "127.0.0.1", "guest", "wrong", "/", "wrong password", "PLAIN login refused: user 'guest' - invalid credentials"},
		{"not allowed from this address", ip, "guest", "guest", "/", "not allowed from this address", "PLAIN login refused: user 'guest' can only connect via localhost"},
		{"no access to the vhost", "127.0.0.1", "app", "app-pw", "/", "no access to the vhost", "access to vhost '/' refused for user 'app'"},
		{"no such vhost", "127.0.0.1", "guest", "guest", "nowhere", "no such vhost", "vhost 'nowhere' not found"},
	}
	for _, r := range refusals {
		t.Run("amqp/"+r.name, func(t *testing.T) {
			if c, err := dial(r.host, r.user, r.pass, r.vhost); err == nil {
				c.Close()
				t.Fatal("accepted")
			}
			waitLogged(t, logs, logLine{msg: []string{"Error on AMQP connection " + r.host + ":", r.msg},
				attrs: map[string]string{"peer": r.host + ":", "user": r.user, "reason": r.reason}})
		})
		t.Run("stream/"+r.name, func(t *testing.T) {
			env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().
				SetUri("rabbitmq-stream://" + r.user + ":" + r.pass + "@" + net.JoinHostPort(r.host, streamPort) + "/" + strings.ReplaceAll(r.vhost, "/", "%2F")).
				SetMaxProducersPerClient(1))
			if err == nil {
				env.Close()
				t.Fatal("accepted")
			}
			waitLogged(t, logs, logLine{msg: []string{"Error on stream connection " + r.host + ":", r.msg},
				attrs: map[string]string{"peer": r.host + ":", "user": r.user, "reason": r.reason}})
		})
	}
}
