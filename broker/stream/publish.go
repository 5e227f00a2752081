package stream

import (
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// publisher is a declared publisher of a connection.
type publisher struct {
	id  uint8
	ref string
	st  *streamState
}

func (c *conn) declarePublisher(m *proto.DeclarePublisher) uint16 {
	if len(m.Reference) > 255 {
		return proto.CodePreconditionFailed
	}
	if !c.perm.Check(meta.Write, m.Stream) {
		return proto.CodeAccessRefused
	}
	st, code := c.stream(m.Stream)
	if code != codeOK {
		return code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.publishers[m.PublisherID]; ok {
		return proto.CodePreconditionFailed
	}
	if m.Reference != "" {
		for _, p := range c.publishers {
			if p.st == st && p.ref == m.Reference {
				return proto.CodePreconditionFailed
			}
		}
	}
	if !st.use(c) {
		return proto.CodeStreamDoesNotExist
	}
	c.publishers[m.PublisherID] = &publisher{id: m.PublisherID, ref: m.Reference, st: st}
	return codeOK
}

func (c *conn) deletePublisher(id uint8) uint16 {
	c.mu.Lock()
	p, ok := c.publishers[id]
	delete(c.publishers, id)
	c.mu.Unlock()
	if !ok {
		return proto.CodePublisherDoesNotExist
	}
	p.st.flush()
	p.st.release(c)
	return codeOK
}

// publish adds a frame's messages to its stream's batch; the stream is
// flushed (one chunk) when the socket runs dry.
func (c *conn) publish(m *proto.Publish) {
	c.mu.Lock()
	p := c.publishers[m.PublisherID]
	c.mu.Unlock()
	if p == nil {
		pe := &proto.PublishError{PublisherID: m.PublisherID, Errors: make([]proto.PublishingError, len(m.Messages))}
		for i, msg := range m.Messages {
			pe.Errors[i] = proto.PublishingError{PublishingID: msg.PublishingID, Code: proto.CodePublisherDoesNotExist}
		}
		c.srv.Counters.countError(proto.CodePublisherDoesNotExist)
		c.out.send(pe)
		return
	}
	dups, err := p.st.add(c, p, m.Messages, c.dups[:0])
	c.srv.Counters.Published.Add(uint64(len(m.Messages)))
	if len(dups) > 0 {
		c.srv.Counters.Duplicates.Add(uint64(len(dups)))
		c.out.appendFn(func(b []byte) []byte { return proto.AppendPublishConfirm(b, p.id, dups) })
	}
	c.dups = dups[:0]
	if err != nil {
		c.srv.log.Warn("stream: publish failed", "stream", p.st.name, "err", err)
		pe := &proto.PublishError{PublisherID: m.PublisherID}
		for _, msg := range m.Messages {
			pe.Errors = append(pe.Errors, proto.PublishingError{PublishingID: msg.PublishingID, Code: proto.CodeInternalError})
		}
		c.srv.Counters.countError(proto.CodeInternalError)
		c.out.send(pe)
		return
	}
	for _, st := range c.dirty {
		if st == p.st {
			return
		}
	}
	c.dirty = append(c.dirty, p.st)
}

// flushPublishes appends what this connection added to its streams.
func (c *conn) flushPublishes() {
	for i, st := range c.dirty {
		st.flush()
		c.dirty[i] = nil
	}
	c.dirty = c.dirty[:0]
}

func (c *conn) queryPublisherSequence(m *proto.QueryPublisherSequence) {
	resp := &proto.QueryPublisherSequenceResponse{CorrelationID: m.CorrelationID, Code: codeOK}
	st, code := c.stream(m.Stream)
	switch {
	case code != codeOK:
		resp.Code = code
	case !c.perm.Check(meta.Read, m.Stream):
		resp.Code = proto.CodeAccessRefused
	default:
		if seq := st.sequence(m.Reference); seq > 0 {
			resp.Sequence = uint64(seq)
		}
	}
	c.srv.Counters.countError(resp.Code)
	c.out.send(resp)
}
