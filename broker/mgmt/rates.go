package mgmt

import (
	"context"
	"sync"
	"time"

	"github.com/warrenmq/warren/broker/amqp"
)

// The overview's message counters, under RabbitMQ's names.
var globalStats = [...]string{"publish", "deliver_get", "ack", "confirm", "redeliver", "return_unroutable", "drop_unroutable"}

// The queue counters, under RabbitMQ's names.
var queueStats = [...]string{"publish", "deliver_get", "ack"}

// The channel counters, under RabbitMQ's names.
var channelStats = [...]string{"publish", "confirm", "return_unroutable", "drop_unroutable", "deliver_get", "redeliver", "ack"}

// The exchange counters, under RabbitMQ's names.
var exchangeStats = [...]string{"publish_in", "publish_out"}

// The overview's churn counters, under RabbitMQ's names.
var churnStats = [...]string{"connection_created", "connection_closed", "channel_created", "channel_closed", "queue_declared", "queue_created", "queue_deleted"}

type queueKey struct{ vhost, name string }

// sample is the node's cumulative counters at one moment.
type sample struct {
	at        time.Time
	global    [len(globalStats)]uint64
	churn     [len(churnStats)]uint64
	queues    map[queueKey][len(queueStats)]uint64
	channels  map[string][len(channelStats)]uint64
	exchanges map[[2]string][len(exchangeStats)]uint64
}

// rates keeps the last two samples of the node's counters; a rate is the
// difference between them over the time between them (per second), so
// every request reads the same rates whatever its frequency, and nothing
// on the message path changes: the counters it already keeps are read
// every sample interval (http.collect_statistics_interval, 5 s as in RabbitMQ) by one goroutine (Server.SampleRates).
type rates struct {
	mu         sync.Mutex
	prev, last *sample
}

// SampleRates samples the node's counters every interval until ctx is
// done; the API's message_stats and churn_rates carry the rates between
// the last two samples (0 until there are two).
func (s *Server) SampleRates(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	s.takeSample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.takeSample()
		}
	}
}

func (s *Server) takeSample() {
	c := s.b.Counters()
	smp := &sample{at: time.Now(), queues: map[queueKey][len(queueStats)]uint64{}}
	unroutable, returned := c.Unroutable.Load(), c.Returned.Load()
	smp.global = [len(globalStats)]uint64{c.Published.Load(), c.Delivered(), c.Acked(), c.Confirmed.Load(), c.Redelivered(), returned, unroutable - min(returned, unroutable)}
	smp.churn = s.churnCounts()
	smp.channels = map[string][len(channelStats)]uint64{}
	for _, c := range s.b.Channels() {
		smp.channels[channelName(c)] = channelCounts(c.Stats)
	}
	smp.exchanges = s.exchangeCounts()
	for _, v := range s.b.VhostList() {
		for _, q := range v.Queues() {
			st := q.Stats()
			smp.queues[queueKey{v.Name(), q.Info().Name}] = [len(queueStats)]uint64{st.Published, st.Delivered, st.Acked}
		}
	}
	s.rates.mu.Lock()
	s.rates.prev, s.rates.last = s.rates.last, smp
	s.rates.mu.Unlock()
}

// pair returns the last two samples (nil, nil before there are two).
func (r *rates) pair() (prev, last *sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prev == nil {
		return nil, nil
	}
	return r.prev, r.last
}

// rate is the per-second rate from a to b over dt.
func rate(a, b uint64, dt time.Duration) float64 {
	if b < a || dt <= 0 {
		return 0
	}
	return float64(b-a) / dt.Seconds()
}

// withRates writes counts and their rates RabbitMQ's way: name: count,
// name_details: {rate: r}.
func withRates(names []string, counts []uint64, rs []float64) map[string]any {
	out := make(map[string]any, 2*len(names))
	for i, n := range names {
		out[n] = counts[i]
		out[n+"_details"] = map[string]any{"rate": rs[i]}
	}
	return out
}

// globalCounts is the node's message counters (globalStats) and their
// rates: the overview's message_stats for a monitoring user, summed over
// the members.
func (s *Server) globalCounts() counts {
	c := s.b.Counters()
	unroutable, returned := c.Unroutable.Load(), c.Returned.Load()
	out := counts{C: []uint64{c.Published.Load(), c.Delivered(), c.Acked(), c.Confirmed.Load(), c.Redelivered(), returned, unroutable - min(returned, unroutable)},
		R: make([]float64, len(globalStats))}
	if prev, last := s.rates.pair(); prev != nil {
		for i := range out.R {
			out.R[i] = rate(prev.global[i], last.global[i], last.at.Sub(prev.at))
		}
	}
	return out
}

// queueMessageStats is a queue's message_stats with its rates.
func (s *Server) queueMessageStats(vhost, name string, published, delivered, acked uint64) map[string]any {
	c := s.queueCounts(vhost, name, published, delivered, acked)
	return withRates(queueStats[:], c.C, c.R)
}

// queueCounts is a queue's counters (queueStats) and their rates.
func (s *Server) queueCounts(vhost, name string, published, delivered, acked uint64) counts {
	rs := make([]float64, len(queueStats))
	if prev, last := s.rates.pair(); prev != nil {
		k := queueKey{vhost, name}
		if a, ok := prev.queues[k]; ok {
			b := last.queues[k]
			for i := range rs {
				rs[i] = rate(a[i], b[i], last.at.Sub(prev.at))
			}
		}
	}
	return counts{C: []uint64{published, delivered, acked}, R: rs}
}

// churnCounts reads the node's churn counters in churnStats' order.
func (s *Server) churnCounts() [len(churnStats)]uint64 {
	c := s.b.Churn()
	return [len(churnStats)]uint64{c.ConnectionsOpened.Load(), c.ConnectionsClosed.Load(), c.ChannelsOpened.Load(), c.ChannelsClosed.Load(),
		c.QueuesDeclared.Load(), c.QueuesCreated.Load(), c.QueuesDeleted.Load()}
}

// churnCounters is the node's churn counters (churnStats) and their
// rates: the overview's churn_rates (connections and channels opened and
// closed, queues declared, created and deleted), summed over the members.
func (s *Server) churnCounters() counts {
	cs := s.churnCounts()
	out := counts{C: cs[:], R: make([]float64, len(churnStats))}
	if prev, last := s.rates.pair(); prev != nil {
		for i := range out.R {
			out.R[i] = rate(prev.churn[i], last.churn[i], last.at.Sub(prev.at))
		}
	}
	return out
}

func channelCounts(st amqp.MessageStats) [len(channelStats)]uint64 {
	return [len(channelStats)]uint64{st.Publish, st.Confirm, st.ReturnUnroutable, st.DropUnroutable, st.DeliverGet, st.Redeliver, st.Ack}
}

// channelMessageStats is a channel's message_stats with its rates.
func (s *Server) channelMessageStats(c amqp.ChannelInfo) map[string]any {
	counts := channelCounts(c.Stats)
	rs := make([]float64, len(channelStats))
	if prev, last := s.rates.pair(); prev != nil {
		name := channelName(c)
		if a, ok := prev.channels[name]; ok {
			b := last.channels[name]
			for i := range rs {
				rs[i] = rate(a[i], b[i], last.at.Sub(prev.at))
			}
		}
	}
	return withRates(channelStats[:], counts[:], rs)
}

// exchangeCounts reads every exchange's counters.
func (s *Server) exchangeCounts() map[[2]string][len(exchangeStats)]uint64 {
	out := map[[2]string][len(exchangeStats)]uint64{}
	for k, c := range s.b.ExchangeStats() {
		out[k] = [len(exchangeStats)]uint64{c.In.Load(), c.Out.Load()}
	}
	return out
}

// exchangeMessageStats is an exchange's message_stats with its rates,
// from counts (exchangeCounts).
func (s *Server) exchangeMessageStats(counts map[[2]string][len(exchangeStats)]uint64, vh, name string) map[string]any {
	k := [2]string{vh, name}
	now := counts[k]
	rs := make([]float64, len(exchangeStats))
	if prev, last := s.rates.pair(); prev != nil {
		if a, ok := prev.exchanges[k]; ok {
			b := last.exchanges[k]
			for i := range rs {
				rs[i] = rate(a[i], b[i], last.at.Sub(prev.at))
			}
		}
	}
	return withRates(exchangeStats[:], now[:], rs)
}
