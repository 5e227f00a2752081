package stream

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
	"github.com/warrenmq/warren/broker/stream/proto"
	"github.com/warrenmq/warren/broker/vhost"
)

// stream looks up a stream of the connection's vhost.
func (c *conn) stream(name string) (*streamState, uint16) {
	st, node, code := c.locate(name)
	if node != "" {
		// Held by another member: the client is to ask for metadata and
		// connect there, as with a RabbitMQ node that has no member of it.
		return nil, proto.CodeStreamNotAvailable
	}
	return st, code
}

// locate finds a stream: on this node (its state, node ""), on another
// member (nil, that member's name, codeOK: see cluster.go), or not at all.
func (c *conn) locate(name string) (*streamState, string, uint16) {
	q, err := c.vh.Queue(c.ctx, name, 0)
	if err != nil {
		return nil, "", proto.CodeStreamDoesNotExist
	}
	if sq, ok := q.(*queue.Stream); ok {
		return c.srv.reg.get(c.vh, name, sq), "", codeOK
	}
	if r, ok := q.(interface{ Node() string }); ok && q.Info().Type == "stream" {
		return nil, r.Node(), codeOK
	}
	return nil, "", proto.CodeStreamDoesNotExist
}

// streamArgs maps create-stream arguments to queue arguments.
func streamArgs(in map[string]string) (map[string]any, bool) {
	args := map[string]any{"x-queue-type": "stream"}
	for k, v := range in {
		switch k {
		case "max-length-bytes", "stream-max-segment-size-bytes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, false
			}
			args["x-"+k] = n
		case "max-age":
			args["x-max-age"] = v
		case "queue-leader-locator", "initial-cluster-size", "stream-filter-size-bytes":
			// Accepted; one node, no bloom filters (see doc.go).
		default:
			return nil, false
		}
	}
	return args, true
}

func validName(name string) bool { return name != "" && len(name) <= 255 }

func (c *conn) createStream(name string, arguments map[string]string) uint16 {
	if !validName(name) {
		return proto.CodePreconditionFailed
	}
	if !c.perm.Check(meta.Configure, name) {
		return proto.CodeAccessRefused
	}
	args, ok := streamArgs(arguments)
	if !ok {
		return proto.CodePreconditionFailed
	}
	return c.declareStream(name, args)
}

func (c *conn) declareStream(name string, args map[string]any) uint16 {
	if _, err := c.vh.Queue(c.ctx, name, 0); err == nil {
		return proto.CodeStreamAlreadyExists
	}
	_, created, err := c.vh.DeclareQueue(c.ctx, vhost.QueueDecl{Name: name, Durable: true, Args: args})
	switch {
	case err == nil && !created:
		return proto.CodeStreamAlreadyExists
	case err == nil:
		return codeOK
	case errors.Is(err, vhost.ErrPrecondition):
		return proto.CodePreconditionFailed
	case errors.Is(err, vhost.ErrAccessRefused):
		return proto.CodeAccessRefused
	}
	c.srv.log.Warn("stream: create stream", "stream", name, "err", err)
	return proto.CodeInternalError
}

func (c *conn) deleteStream(name string) uint16 {
	if !c.perm.Check(meta.Configure, name) {
		return proto.CodeAccessRefused
	}
	if _, _, code := c.locate(name); code != codeOK {
		return code
	}
	return c.removeStream(c.ctx, name)
}

func (c *conn) removeStream(ctx context.Context, name string) uint16 {
	if _, err := c.vh.DeleteQueue(ctx, name, vhost.QueueDeleteOptions{Force: true}); err != nil {
		if errors.Is(err, vhost.ErrNotFound) {
			return proto.CodeStreamDoesNotExist
		}
		c.srv.log.Warn("stream: delete stream", "stream", name, "err", err)
		return proto.CodeInternalError
	}
	return codeOK
}

func (c *conn) streamStats(m *proto.StreamStats) {
	resp := &proto.StreamStatsResponse{CorrelationID: m.CorrelationID, Code: codeOK}
	st, code := c.stream(m.Stream)
	switch {
	case code != codeOK:
		resp.Code = code
	case !c.perm.Check(meta.Read, m.Stream):
		resp.Code = proto.CodeAccessRefused
	default:
		s := st.log.Stats()
		resp.Stats = map[string]int64{
			"first_chunk_id":     s.FirstChunkID,
			"last_chunk_id":      s.LastChunkID,
			"committed_chunk_id": s.CommittedChunkID,
		}
	}
	c.out.send(resp)
}

// Super streams: a direct exchange named after the super stream, with the
// argument x-super-stream, bound to each partition stream with its binding
// key and x-stream-partition-order (as RabbitMQ declares them).

func (c *conn) createSuperStream(m *proto.CreateSuperStream) uint16 {
	if !validName(m.Name) || len(m.Partitions) == 0 || len(m.Partitions) != len(m.BindingKeys) {
		return proto.CodePreconditionFailed
	}
	if !c.perm.Check(meta.Configure, m.Name) || !c.perm.Check(meta.Write, m.Name) {
		return proto.CodeAccessRefused
	}
	for _, p := range m.Partitions {
		if !validName(p) {
			return proto.CodePreconditionFailed
		}
		if !c.perm.Check(meta.Configure, p) || !c.perm.Check(meta.Write, p) {
			return proto.CodeAccessRefused
		}
	}
	args, ok := streamArgs(m.Arguments)
	if !ok {
		return proto.CodePreconditionFailed
	}
	if _, err := c.vh.Exchange(m.Name); err == nil {
		return proto.CodeStreamAlreadyExists
	}
	for _, p := range m.Partitions {
		if _, err := c.vh.Queue(c.ctx, p, 0); err == nil {
			return proto.CodeStreamAlreadyExists
		}
	}
	ctx := c.ctx
	var created []string
	undo := func() {
		_ = c.vh.DeleteExchange(ctx, m.Name, false)
		for _, p := range created {
			c.removeStream(ctx, p)
		}
	}
	for _, p := range m.Partitions {
		if code := c.declareStream(p, args); code != codeOK {
			undo()
			return code
		}
		created = append(created, p)
	}
	if err := c.vh.DeclareExchange(ctx, vhost.ExchangeDecl{Name: m.Name, Type: "direct", Durable: true, Args: map[string]any{"x-super-stream": true}}); err != nil {
		undo()
		if errors.Is(err, vhost.ErrPrecondition) || errors.Is(err, vhost.ErrAccessRefused) {
			return proto.CodePreconditionFailed
		}
		return proto.CodeInternalError
	}
	for i, p := range m.Partitions {
		b := routing.Binding{Source: m.Name, Destination: p, Key: m.BindingKeys[i], Args: map[string]any{"x-stream-partition-order": int64(i)}}
		if err := c.vh.Bind(ctx, b); err != nil {
			undo()
			return proto.CodeInternalError
		}
	}
	return codeOK
}

// superStreamBindings returns the super stream's bindings in partition
// order, or ok false when there is no such super stream.
func (c *conn) superStreamBindings(name string) ([]routing.Binding, bool) {
	if _, err := c.vh.Exchange(name); err != nil {
		return nil, false
	}
	var bs []routing.Binding
	for _, b := range c.vh.Routes().Bindings() {
		if b.Source == name && !b.ToExchange {
			bs = append(bs, b)
		}
	}
	order := func(b routing.Binding) int64 {
		switch n := b.Args["x-stream-partition-order"].(type) {
		case int64:
			return n
		case int:
			return int64(n)
		case int32:
			return int64(n)
		case float64:
			return int64(n)
		}
		return 1 << 62
	}
	slices.SortStableFunc(bs, func(a, b routing.Binding) int {
		oa, ob := order(a), order(b)
		switch {
		case oa < ob:
			return -1
		case oa > ob:
			return 1
		}
		return 0
	})
	return bs, true
}

func (c *conn) deleteSuperStream(name string) uint16 {
	if !c.perm.Check(meta.Configure, name) {
		return proto.CodeAccessRefused
	}
	bs, ok := c.superStreamBindings(name)
	if !ok {
		return proto.CodeStreamDoesNotExist
	}
	for _, b := range bs {
		if !c.perm.Check(meta.Configure, b.Destination) {
			return proto.CodeAccessRefused
		}
	}
	if err := c.vh.DeleteExchange(c.ctx, name, false); err != nil && !errors.Is(err, vhost.ErrNotFound) {
		return proto.CodeInternalError
	}
	for _, b := range bs {
		c.removeStream(c.ctx, b.Destination)
	}
	return codeOK
}

func (c *conn) route(m *proto.Route) {
	resp := &proto.StreamsResponse{For: proto.KeyRoute, CorrelationID: m.CorrelationID, Code: codeOK}
	if !c.perm.Check(meta.Read, m.SuperStream) {
		resp.Code = proto.CodeAccessRefused
	} else if names, err := c.vh.Routes().Route(m.SuperStream, m.RoutingKey, nil, nil); err != nil {
		resp.Code = proto.CodeStreamDoesNotExist
	} else {
		resp.Streams = names
	}
	c.out.send(resp)
}

func (c *conn) partitions(m *proto.Partitions) {
	resp := &proto.StreamsResponse{For: proto.KeyPartitions, CorrelationID: m.CorrelationID, Code: codeOK}
	bs, ok := c.superStreamBindings(m.SuperStream)
	switch {
	case !c.perm.Check(meta.Read, m.SuperStream):
		resp.Code = proto.CodeAccessRefused
	case !ok:
		resp.Code = proto.CodeStreamDoesNotExist
	default:
		for _, b := range bs {
			resp.Streams = append(resp.Streams, b.Destination)
		}
	}
	c.out.send(resp)
}

// partitionIndex is the index of stream among the super stream's
// partitions (-1 if it is not one).
func (c *conn) partitionIndex(superStream, stream string) int {
	bs, _ := c.superStreamBindings(superStream)
	for i, b := range bs {
		if b.Destination == stream {
			return i
		}
	}
	return -1
}
