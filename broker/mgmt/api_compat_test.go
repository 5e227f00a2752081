package mgmt_test

import (
	"net"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// dialNamed opens a connection with a client-provided name and one
// channel, as the official clients' tests do.
func dialNamed(t *testing.T, n *brokertest.Node, name string) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	conn, err := amqp091.DialConfig(n.URL(), amqp091.Config{Properties: amqp091.Table{"connection_name": name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return conn, ch
}

// TestTrailingSlashIsTheSameRoute: RabbitMQ answers /api/connections/ as
// /api/connections, and clients' tests call both.
func TestTrailingSlashIsTheSameRoute(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	dialNamed(t, n, "slash")
	for _, path := range []string{
		"/api/connections/", "/api/channels/", "/api/queues/", "/api/queues/%2F/",
		"/api/exchanges/%2F/", "/api/vhosts/", "/api/overview/", "/api/exchanges/%2F/amq.direct/",
	} {
		t.Run(path, func(t *testing.T) {
			a.must("GET", path, nil, 200)
		})
	}
	eventually.True(t, 5e9, "the connection is listed with a trailing slash", func() bool {
		return len(a.list("/api/connections/")) == 1
	})
}

// TestConnectionAndChannelPeerFields: the fields the official clients'
// tests and rabbitmqadmin read from /api/connections and /api/channels.
func TestConnectionAndChannelPeerFields(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	conn, _ := dialNamed(t, n, "orders-service")
	local := conn.LocalAddr().(*net.TCPAddr)
	var conns, chans []map[string]any
	eventually.True(t, 5e9, "the connection and its channel are listed", func() bool {
		conns, chans = a.list("/api/connections"), a.list("/api/channels")
		return len(conns) == 1 && len(chans) == 1
	})
	c := conns[0]
	props, _ := c["client_properties"].(map[string]any)
	details, _ := chans[0]["connection_details"].(map[string]any)
	tests := []struct {
		field string
		got   any
		want  any
	}{
		{"connection client_properties.connection_name", props["connection_name"], "orders-service"},
		{"connection peer_host", c["peer_host"], local.IP.String()},
		{"connection peer_port", c["peer_port"], float64(local.Port)},
		{"connection user", c["user"], "guest"},
		{"connection vhost", c["vhost"], "/"},
		{"connection node", c["node"], n.Cfg.Cluster.NodeName},
		{"channel connection_details.name", details["name"], c["name"]},
		{"channel connection_details.peer_host", details["peer_host"], local.IP.String()},
		{"channel connection_details.peer_port", details["peer_port"], float64(local.Port)},
		{"channel number", chans[0]["number"], float64(1)},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.field, tt.got, tt.want)
		}
	}
}
