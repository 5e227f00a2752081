package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/counters"
	"github.com/warrenmq/warren/broker/mgmt"
	"github.com/warrenmq/warren/broker/stream"
)

// httpServers lists the HTTP listeners: the management API and metrics.
// With the API on, its rates sampler runs until ctx is done.
func (b *Broker) httpServers(ctx context.Context) []httpServer {
	reg := prometheus.NewRegistry()
	mgmt.NewMetrics(reg, b)
	reg.MustRegister(b.Stream.Collector(), b.cluster.net.Collector())
	h := b.cfg.HTTP
	api := mgmt.ListenerLimits{ReadHeaderTimeout: h.ReadHeaderTimeout, ReadTimeout: h.ReadTimeout, WriteTimeout: h.WriteTimeout, IdleTimeout: h.IdleTimeout, MaxConnections: h.MaxConnections}
	metrics := api
	metrics.MaxConnections = b.cfg.Prometheus.MaxConnections
	pprof := metrics
	pprof.WriteTimeout = 0 // a profile or trace takes as long as it is asked to
	apiServer := mgmt.NewServer(b, b.log.With("subsystem", "http"))
	if h.Listen != "" {
		go apiServer.SampleRates(ctx, h.CollectStatisticsInterval)
	}
	return []httpServer{
		{name: ListenerHTTP, addr: h.Listen, handler: apiServer.Handler(), limits: api},
		{name: ListenerPrometheus, addr: b.cfg.Prometheus.Listen, handler: mgmt.MetricsHandler(reg, b), limits: metrics},
		{name: ListenerPprof, addr: b.cfg.Debug.PprofListen, handler: pprofHandler(), limits: pprof},
	}
}

// pprofHandler serves Go's runtime profiles (debug.pprof_listen).
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

var _ mgmt.Broker = (*Broker)(nil)

// NodeName implements mgmt.Broker.
func (b *Broker) NodeName() string { return b.cfg.Cluster.NodeName }

// Version implements mgmt.Broker.
func (b *Broker) Version() string { return Version }

// Connections implements mgmt.Broker.
func (b *Broker) Connections() []amqp.ConnectionInfo { return b.AMQP.Connections() }

// Channels implements mgmt.Broker.
func (b *Broker) Channels() []amqp.ChannelInfo { return b.AMQP.Channels() }

// ExchangeStats implements mgmt.Broker: the counters of exchanges that
// exist; those of deleted ones are forgotten (the resource watch also
// does it every second, so they stay bounded without the HTTP API).
func (b *Broker) ExchangeStats() map[[2]string]*amqp.ExchangeCounters {
	return b.AMQP.ExchangeStats(func(vh, name string) bool {
		v, ok := b.Vhost(vh)
		if !ok {
			return false
		}
		_, ok = v.Routes().Exchange(name)
		return ok
	})
}

// Consumers implements mgmt.Broker.
func (b *Broker) Consumers() []amqp.ConsumerInfo { return b.AMQP.Consumers() }

// CloseConnection implements mgmt.Broker.
func (b *Broker) CloseConnection(name, reason string) error {
	return b.AMQP.CloseConnection(name, reason)
}

// Counters implements mgmt.Broker.
func (b *Broker) Counters() *amqp.Counters { return &b.AMQP.Counters }

// Churn implements mgmt.Broker.
func (b *Broker) Churn() *counters.Churn { return &b.churn }

// StreamCounters implements mgmt.Broker.
func (b *Broker) StreamCounters() *stream.Counters { return &b.Stream.Counters }

// StreamClients implements mgmt.Broker: the stream protocol's open
// connections, declared publishers and subscriptions.
func (b *Broker) StreamClients() (connections, publishers, consumers int) {
	p, c := b.Stream.PublishersConsumers()
	return b.Stream.ConnectionCount(), p, c
}

// Listeners implements mgmt.Broker.
func (b *Broker) Listeners() map[string]string {
	b.lnMu.Lock()
	defer b.lnMu.Unlock()
	out := map[string]string{}
	for name, ln := range b.listeners {
		out[name] = ln.Addr().String()
	}
	return out
}

// Ready implements mgmt.Broker: recovered and listening.
func (b *Broker) Ready() bool { return b.ready.Load() }

// errMetadataDown is the node's fault while its metadata group is down
// (the cause, which may name files, is in the log, not shown to probes).
var errMetadataDown = errors.New("this node has no metadata until it restarts: a reset (warren ctl join) failed and its metadata Raft group could not start again; restart the node (its log says why the reset failed)")

// Fault implements mgmt.Broker: the metadata group down after a reset
// failed (raftgroup.Group.Down) until the node restarts; nil otherwise.
func (b *Broker) Fault() error {
	if b.cluster == nil || b.cluster.meta == nil || b.cluster.meta.Group().Down() == nil {
		return nil
	}
	return errMetadataDown
}

// ClusterID implements mgmt.Broker.
func (b *Broker) ClusterID() string { return b.clusterID }
