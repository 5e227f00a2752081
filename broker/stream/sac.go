package stream

import (
	"slices"

	"github.com/warrenmq/warren/broker/stream/proto"
)

// sacGroup is the single-active-consumer group of one consumer name on one
// stream: members in arrival order, one of them active. For a plain stream
// the first member is active; for a partition of a super stream, member
// partition % len(members), so that a super stream's partitions spread
// over its consumers (as RabbitMQ).
type sacGroup struct {
	members []*subscription
	active  *subscription
}

func (st *streamState) join(s *subscription) {
	st.mu.Lock()
	defer st.mu.Unlock()
	g := st.groups[s.name]
	if g == nil {
		g = &sacGroup{}
		st.groups[s.name] = g
	}
	g.members = append(g.members, s)
	st.rebalanceLocked(s.name, g)
}

func (st *streamState) leave(s *subscription) {
	st.mu.Lock()
	defer st.mu.Unlock()
	g := st.groups[s.name]
	if g == nil {
		return
	}
	g.members = slices.DeleteFunc(g.members, func(m *subscription) bool { return m == s })
	if g.active == s {
		g.active = nil
	}
	st.rebalanceLocked(s.name, g)
}

func (st *streamState) rebalanceLocked(name string, g *sacGroup) {
	if len(g.members) == 0 {
		delete(st.groups, name)
		return
	}
	idx := 0
	if p := g.members[0].partition; p > 0 {
		idx = p % len(g.members)
	}
	want := g.members[idx]
	if g.active == want {
		return
	}
	if old := g.active; old != nil {
		old.setActive(false)
	}
	g.active = want
	want.setActive(true)
}

// setActive sends a consumer update. The client answers with the offset
// to start from (consumerUpdateResponse); deactivation stops delivery now.
func (s *subscription) setActive(active bool) {
	s.mu.Lock()
	s.active = active
	s.mu.Unlock()
	if !active {
		go s.pause()
	}
	c := s.c
	c.mu.Lock()
	c.nextCorr++
	corr := c.nextCorr
	c.updates[corr] = s
	c.mu.Unlock()
	c.srv.log.Debug("stream: consumer update", "stream", s.st.name, "name", s.name, "subscription", s.id, "active", active)
	c.out.send(&proto.ConsumerUpdate{CorrelationID: corr, SubscriptionID: s.id, Active: active})
}

func (c *conn) consumerUpdateResponse(m *proto.ConsumerUpdateResponse) {
	c.mu.Lock()
	s := c.updates[m.CorrelationID]
	delete(c.updates, m.CorrelationID)
	c.mu.Unlock()
	if s == nil {
		return
	}
	c.srv.log.Debug("stream: consumer update response", "subscription", s.id, "code", m.Code, "offset", m.Offset)
	s.mu.Lock()
	active, stopped := s.active, s.stopped
	s.mu.Unlock()
	if !active || stopped || m.Code != codeOK || m.Offset.Type == proto.OffsetNone {
		return
	}
	s.start(m.Offset)
}
