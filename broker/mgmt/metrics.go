package mgmt

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics exports the node's state to Prometheus. Everything is read at
// scrape time from the broker (counters are cumulative atomics), so the hot
// paths pay nothing for metrics.
type Metrics struct {
	b     Broker
	fsync prometheus.Histogram

	connections, channels, consumers                                          *prometheus.Desc
	published, delivered, acked, confirmed, returned, redelivered, unroutable *prometheus.Desc
	queueReady, queueUnacked, queueConsumers, queueBytes                      *prometheus.Desc
	storeBytes, storeLive                                                     *prometheus.Desc
	deadLettersDropped                                                        *prometheus.Desc
	alarm                                                                     *prometheus.Desc
}

// NewMetrics registers the node's collectors (and Go runtime and process
// collectors) on reg.
func NewMetrics(reg prometheus.Registerer, b Broker) *Metrics {
	m := &Metrics{
		b: b,
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "warren_fsync_duration_seconds",
			Help:    "Duration of group-commit fsync rounds.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		connections:    prometheus.NewDesc("warren_connections", "Open client connections.", nil, nil),
		channels:       prometheus.NewDesc("warren_channels", "Open channels.", nil, nil),
		consumers:      prometheus.NewDesc("warren_consumers", "Consumers on all queues.", nil, nil),
		published:      prometheus.NewDesc("warren_messages_published_total", "Messages published.", nil, nil),
		delivered:      prometheus.NewDesc("warren_messages_delivered_total", "Messages delivered to consumers and basic.get.", nil, nil),
		acked:          prometheus.NewDesc("warren_messages_acknowledged_total", "Messages acknowledged by consumers.", nil, nil),
		confirmed:      prometheus.NewDesc("warren_messages_confirmed_total", "Messages confirmed to publishers.", nil, nil),
		returned:       prometheus.NewDesc("warren_messages_returned_total", "Mandatory messages returned as unroutable.", nil, nil),
		redelivered:    prometheus.NewDesc("warren_messages_redelivered_total", "Messages delivered with the redelivered flag.", nil, nil),
		unroutable:     prometheus.NewDesc("warren_messages_unroutable_total", "Messages that reached no queue.", nil, nil),
		queueReady:     prometheus.NewDesc("warren_queue_messages_ready", "Messages ready for delivery.", []string{"vhost", "queue"}, nil),
		queueUnacked:   prometheus.NewDesc("warren_queue_messages_unacked", "Messages delivered and not yet acknowledged.", []string{"vhost", "queue"}, nil),
		queueConsumers: prometheus.NewDesc("warren_queue_consumers", "Consumers on the queue.", []string{"vhost", "queue"}, nil),
		queueBytes:     prometheus.NewDesc("warren_queue_messages_bytes", "Bytes of message bodies in the queue.", []string{"vhost", "queue"}, nil),
		storeBytes:     prometheus.NewDesc("warren_message_store_bytes", "Bytes in the vhost's message store files.", []string{"vhost"}, nil),
		storeLive:      prometheus.NewDesc("warren_message_store_live_bytes", "Live bytes in the vhost's message store.", []string{"vhost"}, nil),
		deadLettersDropped: prometheus.NewDesc("warren_dead_letters_dropped_total",
			"Dead letters dropped because the node of the queue they were routed to did not take them (down or unreachable).", []string{"vhost"}, nil),
		alarm: prometheus.NewDesc("warren_alarm", "1 while a resource alarm is raised.", []string{"resource"}, nil),
	}
	reg.MustRegister(m, m.fsync, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&rabbitCollector{b: b, endpoint: "aggregated"})
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.connections, m.channels, m.consumers, m.published, m.delivered, m.acked, m.confirmed, m.returned, m.redelivered, m.unroutable, m.queueReady, m.queueUnacked, m.queueConsumers, m.queueBytes, m.storeBytes, m.storeLive, m.deadLettersDropped, m.alarm} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(m.connections, float64(len(m.b.Connections())))
	gauge(m.channels, float64(len(m.b.Channels())))
	c := m.b.Counters()
	counter(m.published, c.Published.Load())
	counter(m.delivered, c.Delivered())
	counter(m.acked, c.Acked())
	counter(m.confirmed, c.Confirmed.Load())
	counter(m.returned, c.Returned.Load())
	counter(m.redelivered, c.Redelivered())
	counter(m.unroutable, c.Unroutable.Load())
	consumers := 0
	for _, v := range m.b.VhostList() {
		for _, q := range v.Queues() {
			st := q.Stats()
			name := q.Info().Name
			consumers += st.Consumers
			gauge(m.queueReady, float64(st.Ready), v.Name(), name)
			gauge(m.queueUnacked, float64(st.Unacked), v.Name(), name)
			gauge(m.queueConsumers, float64(st.Consumers), v.Name(), name)
			gauge(m.queueBytes, float64(st.ReadyBytes+st.UnackedBytes), v.Name(), name)
		}
		ss := v.Store().Stats()
		for _, s := range ss.FsyncSeconds {
			m.fsync.Observe(s)
		}
		gauge(m.storeBytes, float64(ss.Bytes), v.Name())
		gauge(m.storeLive, float64(ss.LiveBytes), v.Name())
		ch <- prometheus.MustNewConstMetric(m.deadLettersDropped, prometheus.CounterValue, float64(v.DeadLettersDropped()), v.Name())
	}
	gauge(m.consumers, float64(consumers))
	alarms := map[string]float64{"memory": 0, "disk": 0}
	for _, a := range m.b.Alarms() {
		alarms[a] = 1
	}
	for r, v := range alarms {
		gauge(m.alarm, v, r)
	}
}

// MetricsHandler serves /metrics for reg (NewMetrics' registry), and
// RabbitMQ's /metrics/per-object and /metrics/detailed for b.
//
// The endpoints speak OpenMetrics to a scraper that asks for it, as
// Prometheus does: there a histogram's le label reads "100.0", as RabbitMQ
// writes it and its dashboards select it (the classic text format would
// say "100").
func MetricsHandler(reg prometheus.Gatherer, b Broker) http.Handler {
	opts := promhttp.HandlerOpts{EnableOpenMetrics: true}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, opts))
	perObject := prometheus.NewRegistry()
	perObject.MustRegister(&rabbitCollector{b: b, endpoint: "per-object"}, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux.Handle("/metrics/per-object", promhttp.HandlerFor(perObject, opts))
	mux.HandleFunc("/metrics/detailed", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		detailed := prometheus.NewRegistry()
		detailed.MustRegister(detailedCollector(b, q["family"], q["vhost"]))
		promhttp.HandlerFor(detailed, opts).ServeHTTP(w, r)
	})
	return mux
}
