package mgmt

import (
	"github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/vhost"
)

// Broker is what the HTTP API needs from a node. Implemented by server.Broker.
type Broker interface {
	Meta() meta.Store
	NodeName() string
	Version() string
	Vhost(name string) (*vhost.Vhost, bool)
	VhostList() []*vhost.Vhost
	Connections() []amqp.ConnectionInfo
	Channels() []amqp.ChannelInfo
	// CloseConnection closes a client connection by name (amqp.ErrNoConnection if unknown).
	CloseConnection(name, reason string) error
	// Alarms lists active resource alarms ("memory", "disk").
	Alarms() []string
	Counters() *amqp.Counters
	// NewMessageID returns a node-unique message id (for HTTP publishes).
	NewMessageID() uint64
	// Listeners maps protocol ("amqp", "http", ...) to listen address.
	Listeners() map[string]string
	// Ready reports whether the node has recovered and listens.
	Ready() bool
}
