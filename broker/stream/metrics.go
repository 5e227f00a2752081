package stream

import "github.com/prometheus/client_golang/prometheus"

// collector exposes the server's counters to Prometheus.
type collector struct {
	s                                                          *Server
	conns, published, confirmed, duplicates, delivered, chunks *prometheus.Desc
}

// Collector returns a Prometheus collector of the stream protocol server:
// open connections and message counters.
func (s *Server) Collector() prometheus.Collector {
	return &collector{
		s:          s,
		conns:      prometheus.NewDesc("warren_stream_connections", "Open stream protocol connections.", nil, nil),
		published:  prometheus.NewDesc("warren_stream_messages_published_total", "Messages received in stream protocol publish frames.", nil, nil),
		confirmed:  prometheus.NewDesc("warren_stream_messages_confirmed_total", "Messages confirmed to stream protocol publishers once durable.", nil, nil),
		duplicates: prometheus.NewDesc("warren_stream_messages_duplicate_total", "Messages confirmed but not stored again (publisher de-duplication).", nil, nil),
		delivered:  prometheus.NewDesc("warren_stream_messages_delivered_total", "Messages in chunks delivered to stream protocol subscriptions.", nil, nil),
		chunks:     prometheus.NewDesc("warren_stream_chunks_delivered_total", "Chunks delivered to stream protocol subscriptions.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.published, c.confirmed, c.duplicates, c.delivered, c.chunks} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	n := &c.s.Counters
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(c.s.ConnectionCount()))
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.published, n.Published.Load()}, {c.confirmed, n.Confirmed.Load()}, {c.duplicates, n.Duplicates.Load()},
		{c.delivered, n.Delivered.Load()}, {c.chunks, n.ChunksDelivered.Load()}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}
