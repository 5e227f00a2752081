package transport

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exposes a gRPC Network's Stats to Prometheus.
type collector struct {
	n                                                  *GRPCNetwork
	framesSent, messagesSent, framesReceived, received *prometheus.Desc
	pings                                              *prometheus.Desc
}

// Collector returns a Prometheus collector of the node's traffic with its
// peers: stream writes (frames) and the messages they carried, each way,
// and node heartbeats sent. Messages per frame is how well the transport
// batches what is queued for a peer.
func (n *GRPCNetwork) Collector() prometheus.Collector {
	return &collector{
		n:              n,
		framesSent:     prometheus.NewDesc("warren_cluster_frames_sent_total", "Frames (stream writes) sent to other nodes.", nil, nil),
		messagesSent:   prometheus.NewDesc("warren_cluster_messages_sent_total", "Messages (requests, answers, snapshot chunks) sent to other nodes.", nil, nil),
		framesReceived: prometheus.NewDesc("warren_cluster_frames_received_total", "Frames received from other nodes.", nil, nil),
		received:       prometheus.NewDesc("warren_cluster_messages_received_total", "Messages received from other nodes.", nil, nil),
		pings:          prometheus.NewDesc("warren_cluster_pings_sent_total", "Node heartbeats sent to peers that were silent.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.framesSent, c.messagesSent, c.framesReceived, c.received, c.pings} {
		ch <- d
	}
	c.n.calls.vec.Describe(ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.n.Stats()
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.framesSent, s.FramesSent}, {c.messagesSent, s.MessagesSent}, {c.framesReceived, s.FramesReceived},
		{c.received, s.MessagesReceived}, {c.pings, s.PingsSent}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
	c.n.calls.vec.Collect(ch)
}

// callTimes is the round trip of the calls this node makes to others, by
// method: from the request queued for the peer to its answer (or the
// call's failure: its timeout, the link lost). It is where the time of a
// request that crosses nodes goes (a forwarded publish's confirm waits for
// its forward.publish call), and, against the owner's own handling, what
// the network and the two nodes' schedulers add. Methods are the callers'
// constants (never a client's or a peer's string), so the label's values
// are few.
type callTimes struct {
	vec *prometheus.HistogramVec
	mu  sync.RWMutex
	by  map[string]prometheus.Observer // no label lookup per call
}

func newCallTimes() *callTimes {
	return &callTimes{vec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "warren_cluster_call_duration_seconds",
		Help: "Round trip of calls to other nodes (request to answer), by method.",
		// 25 µs to about 3.3 s: a call between nodes of one machine takes
		// a few hundred µs, one with a durable write several ms.
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 18),
	}, []string{"method"}), by: map[string]prometheus.Observer{}}
}

// since records a call of method started at start.
func (t *callTimes) since(method string, start time.Time) {
	t.mu.RLock()
	o := t.by[method]
	t.mu.RUnlock()
	if o == nil {
		o = t.vec.WithLabelValues(method)
		t.mu.Lock()
		t.by[method] = o
		t.mu.Unlock()
	}
	o.Observe(time.Since(start).Seconds())
}
