package amqp

import (
	"sync"
	"sync/atomic"
)

// MessageStats are a channel's cumulative message counters, as the HTTP
// API's channel message_stats name them.
type MessageStats struct {
	Publish, Confirm, ReturnUnroutable, DropUnroutable uint64
	DeliverGet, Redeliver, Ack                         uint64
}

// chanStats is a channel's counters. Each is counted where the channel
// already holds a lock or owns the data, so the message paths pay an
// increment and nothing more: deliveries, redeliveries and acks under
// ch.mu (held there already), confirms under the confirm tracker's mutex,
// and publishes, returns and drops by the reader in pending, added to
// the counters under ch.mu once per read batch (conn.flushChanStats).
type chanStats struct {
	deliverGet, redeliver, ack uint64 // guarded by ch.mu
	publish, returned, dropped uint64 // guarded by ch.mu; the reader adds pending

	// pending is what the reader counted since its last flush (reader only).
	pending struct {
		publish, returned, dropped uint64
		// The exchange the reader's last publishes went to, and how many
		// it took in and routed out.
		exchange string
		xc       *ExchangeCounters
		in, out  uint64
	}
	// exchanges caches the counters of the exchanges this channel
	// published to (reader only), so a channel that alternates between
	// exchanges does not take the server's lock per publish.
	exchanges map[string]*ExchangeCounters
}

// ExchangeCounters are an exchange's cumulative message counters: messages
// published into it, and those it routed to at least one queue (RabbitMQ's
// publish_in and publish_out).
type ExchangeCounters struct {
	In, Out atomic.Uint64
	// gone is set when the exchange's counters are forgotten (it was
	// deleted): a channel that cached them looks them up again.
	gone atomic.Bool
}

type exchangeKey struct{ vhost, name string }

// exchangeStats holds the counters of every exchange AMQP clients publish
// to; channels add to them once per read batch.
type exchangeStats struct {
	mu sync.Mutex
	m  map[exchangeKey]*ExchangeCounters
}

func (s *exchangeStats) counters(vhost, name string) *ExchangeCounters {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[exchangeKey]*ExchangeCounters{}
	}
	k := exchangeKey{vhost, name}
	c := s.m[k]
	if c == nil {
		c = &ExchangeCounters{}
		s.m[k] = c
	}
	return c
}

// ExchangeStats returns the message counters of the exchanges AMQP
// clients published to, by vhost and name ("" is the default exchange),
// and forgets those of exchanges live says are gone (deleted: one declared
// again under the name starts from 0, as in RabbitMQ), so the counters are
// bounded by the exchanges that exist. The HTTP API's sampler calls it
// every few seconds.
func (s *Server) ExchangeStats(live func(vhost, name string) bool) map[[2]string]*ExchangeCounters {
	s.xstats.mu.Lock()
	defer s.xstats.mu.Unlock()
	out := make(map[[2]string]*ExchangeCounters, len(s.xstats.m))
	for k, c := range s.xstats.m {
		if !live(k.vhost, k.name) {
			c.gone.Store(true)
			delete(s.xstats.m, k)
			continue
		}
		out[[2]string{k.vhost, k.name}] = c
	}
	return out
}

// countPublish is the reader counting a publish to exchange, routed to a
// queue or not, returned (mandatory) or dropped.
func (ch *channel) countPublish(exchange string, routed, returned bool) {
	p := &ch.stats.pending
	if p.xc == nil || p.exchange != exchange || p.xc.gone.Load() {
		ch.flushExchange()
		p.exchange, p.xc = exchange, ch.exchangeCounters(exchange)
	}
	p.publish++
	p.in++
	switch {
	case routed:
		p.out++
	case returned:
		p.returned++
	default:
		p.dropped++
	}
	if sc := ch.c.statsCh; sc != ch {
		if sc != nil { // counts of another channel in this read batch
			sc.flushStats()
		}
		ch.c.statsCh = ch
	}
}

// exchangeCounters returns an exchange's counters from the channel's
// cache, or from the server's table (under its lock) the first time and
// after the exchange was deleted.
func (ch *channel) exchangeCounters(exchange string) *ExchangeCounters {
	if xc := ch.stats.exchanges[exchange]; xc != nil && !xc.gone.Load() {
		return xc
	}
	if ch.stats.exchanges == nil || len(ch.stats.exchanges) >= 64 {
		ch.stats.exchanges = map[string]*ExchangeCounters{} // bounded: a channel publishing to many starts over
	}
	xc := ch.c.srv.xstats.counters(ch.c.vh.Name(), exchange)
	ch.stats.exchanges[exchange] = xc
	return xc
}

// flushExchange adds the pending exchange counts to the exchange's counters.
func (ch *channel) flushExchange() {
	p := &ch.stats.pending
	if p.xc != nil && p.in > 0 {
		p.xc.In.Add(p.in)
		if p.out > 0 {
			p.xc.Out.Add(p.out)
		}
	}
	p.in, p.out = 0, 0
}

// flushStats adds what the reader counted to the channel's counters.
func (ch *channel) flushStats() {
	p := &ch.stats.pending
	if p.publish == 0 {
		return
	}
	ch.flushExchange()
	ch.mu.Lock()
	ch.stats.publish += p.publish
	ch.stats.returned += p.returned
	ch.stats.dropped += p.dropped
	ch.mu.Unlock()
	p.publish, p.returned, p.dropped = 0, 0, 0
}

// flushChanStats flushes the counts of the channel the reader last
// published on (once per read batch, and when a channel closes).
func (c *conn) flushChanStats() {
	if c.statsCh != nil {
		c.statsCh.flushStats()
		c.statsCh = nil
	}
}

// messageStatsLocked reads the channel's counters but confirms (the
// confirm tracker's); ch.mu is held.
func (ch *channel) messageStatsLocked() MessageStats {
	return MessageStats{Publish: ch.stats.publish, ReturnUnroutable: ch.stats.returned, DropUnroutable: ch.stats.dropped,
		DeliverGet: ch.stats.deliverGet, Redeliver: ch.stats.redeliver, Ack: ch.stats.ack}
}
