package server_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/server"
)

// nonLoopbackIP returns an IPv4 address of this machine that is not a
// loopback one: connecting to it from here makes the broker see a peer that
// is not loopback, over real sockets, as a client on another host would.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Skip("this machine has no non-loopback IPv4 address to connect from")
	return ""
}

// A user in auth.loopback_users (guest) is refused on every listener when it
// connects from an address that is not loopback, and accepted from
// loopback; another user with the same rights is accepted from anywhere.
func TestProbeLoopbackUsersOnEveryListener(t *testing.T) {
	ip := nonLoopbackIP(t)
	n := brokertest.Start(t, func(c *config.Config) {
		c.AMQP.Listen, c.Stream.Listen, c.HTTP.Listen = ":0", ":0", ":0"
		c.Stream.AdvertisedHost = ip
	})
	if code := n.API(t, "PUT", "/api/users/ops", map[string]any{"password": "ops-pw", "tags": "administrator"}, nil); code != 201 {
		t.Fatalf("create user ops: %d", code)
	}
	if code := n.API(t, "PUT", "/api/permissions/%2F/ops", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, nil); code != 201 {
		t.Fatalf("grant ops: %d", code)
	}
	port := func(listener string) string {
		return strconv.Itoa(n.Addr(listener).(*net.TCPAddr).Port)
	}
	protocols := []struct {
		name            string
		login           func(host, user, pass string) error
		loopbackRefusal func(error) bool
	}{
		{"amqp", func(host, user, pass string) error {
			c, err := amqp091.Dial("amqp://" + user + ":" + pass + "@" + net.JoinHostPort(host, port(server.ListenerAMQP)) + "/")
			if err == nil {
				_ = c.Close()
			}
			return err
		}, func(err error) bool {
			var ae *amqp091.Error
			return errors.As(err, &ae) && ae.Code == amqp091.AccessRefused
		}},
		{"stream", func(host, user, pass string) error {
			env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().
				SetUri("rabbitmq-stream://" + user + ":" + pass + "@" + net.JoinHostPort(host, port(server.ListenerStream)) + "/%2F").
				SetMaxProducersPerClient(1))
			if err == nil {
				_ = env.Close()
			}
			return err
		}, func(err error) bool { return errors.Is(err, stream.AuthenticationFailureLoopbackError) }},
		{"http", func(host, user, pass string) error {
			// A write, as in the report: creating a vhost.
			req, _ := http.NewRequest("PUT", "http://"+net.JoinHostPort(host, port(server.ListenerHTTP))+"/api/vhosts/from-"+user, strings.NewReader("{}"))
			req.SetBasicAuth(user, pass)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				body, _ := io.ReadAll(resp.Body)
				return fmt.Errorf("%s: %s", resp.Status, body)
			}
			return nil
		}, func(err error) bool {
			return strings.Contains(err.Error(), "401") && strings.Contains(err.Error(), "User can only log in via localhost")
		}},
	}
	cases := []struct {
		name, host, user, pass string
		accepted               bool
	}{
		{"guest from another host", ip, "guest", "guest", false},
		{"guest from loopback", "127.0.0.1", "guest", "guest", true},
		{"another administrator from another host", ip, "ops", "ops-pw", true},
	}
	for _, p := range protocols {
		for _, c := range cases {
			t.Run(p.name+"/"+c.name, func(t *testing.T) {
				err := p.login(c.host, c.user, c.pass)
				if c.accepted && err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !c.accepted && (err == nil || !p.loopbackRefusal(err)) {
					t.Fatalf("err = %v, want the protocol's loopback refusal", err)
				}
			})
		}
	}
	if code := n.API(t, "GET", "/api/vhosts/from-guest", nil, nil); code != 200 {
		t.Fatalf("guest's vhost from loopback: %d", code)
	}
}
