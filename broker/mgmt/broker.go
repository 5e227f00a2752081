package mgmt

import (
	"net"
	"time"

	"github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/counters"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/stream"
	"github.com/warrenmq/warren/broker/vhost"
)

// Broker is what the HTTP API needs from a node. Implemented by server.Broker.
type Broker interface {
	Meta() meta.Store
	// Login checks a user's password and whether they may log in from
	// remote (the rules every listener shares: broker/auth).
	Login(user, password string, remote net.Addr) (meta.User, error)
	NodeName() string
	// ClusterID is a permanent id made on the node's first start
	// (rabbitmq_cluster_permanent_id).
	ClusterID() string
	Version() string
	Vhost(name string) (*vhost.Vhost, bool)
	VhostList() []*vhost.Vhost
	Connections() []amqp.ConnectionInfo
	Channels() []amqp.ChannelInfo
	// Consumers lists the AMQP consumers of every channel.
	Consumers() []amqp.ConsumerInfo
	// ExchangeStats are the message counters of the exchanges AMQP clients
	// published to and that exist, by vhost and name.
	ExchangeStats() map[[2]string]*amqp.ExchangeCounters
	// CloseConnection closes a client connection by name (amqp.ErrNoConnection if unknown).
	CloseConnection(name, reason string) error
	// Alarms lists active resource alarms ("memory", "disk").
	Alarms() []string
	Counters() *amqp.Counters
	// Churn counts connections and channels opened and closed and queues
	// declared, created and deleted since the node started.
	Churn() *counters.Churn
	// StreamCounters are the stream protocol's message and error counters.
	StreamCounters() *stream.Counters
	// StreamClients counts the stream protocol's open connections,
	// declared publishers and subscriptions.
	StreamClients() (connections, publishers, consumers int)
	// NewMessageID returns a node-unique message id (for HTTP publishes).
	NewMessageID() uint64
	// Resources is the node's last resource sample and its alarm limits.
	Resources() NodeResources
	// Listeners maps protocol ("amqp", "http", ...) to listen address.
	Listeners() map[string]string
	// Ready reports whether the node has recovered and listens.
	Ready() bool
	// Fault is what keeps the node from serving until it restarts, nil
	// when nothing does (its metadata group down after a reset failed).
	// Probes without credentials are shown its text.
	Fault() error
	Cluster
}

// NodeResources is what a node's resource watch last measured (every
// second), with the limits that raise its alarms.
type NodeResources struct {
	StartedAt     time.Time
	MemUsed       int64 // Go heap objects: the figure the memory alarm compares
	MemLimit      int64 // 0: no memory alarm
	DiskFree      int64 // bytes available to the data directory; -1 unknown
	DiskFreeLimit int64
	MemAlarm      bool
	DiskAlarm     bool
	FDUsed        int64 // open file descriptors; -1 unknown
	FDLimit       int64 // their limit (RLIMIT_NOFILE); -1 unknown
}
