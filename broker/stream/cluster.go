package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/warrenmq/warren/broker/stream/proto"
)

// In a cluster a stream lives on one node (the one it was declared on).
// Stream clients find it as they do in RabbitMQ: the metadata command
// names the stream's leader by its host and port, and the client opens a
// connection there for its publishers and consumers. A node that does not
// hold a stream answers those commands with stream-not-available (as
// RabbitMQ does on a node without a member), which the clients take as a
// cue to ask for metadata again; deleting the stream works from any node.
//
// The host and port a node advertises are its own (stream.advertised_*, or
// its listener): the other nodes ask it for them with one node-level call
// and keep the answer for endpointTTL, so a restarted pod's new address is
// picked up within seconds.

// Nodes reaches the cluster's other members: CallNode asks node's
// handler registered under method, HandleNode registers this node's,
// NodeRunning says whether a member answers its pings now. All are safe
// for concurrent use; CallNode blocks until the answer or ctx's end.
type Nodes interface {
	NodeRunning(node string) bool
	CallNode(ctx context.Context, node, method string, req []byte) ([]byte, error)
	HandleNode(method string, h func(ctx context.Context, req []byte) ([]byte, error))
}

const (
	methodEndpoint = "stream.endpoint"
	endpointTTL    = 5 * time.Second
	// endpointWait bounds a metadata answer's wait for a member's address.
	endpointWait = 2 * time.Second
)

// endpoint is what a node advertises to stream clients.
type endpoint struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	TLSPort int    `json:"tls_port"`
	at      time.Time
}

// endpoints caches the other members' advertised endpoints.
type endpoints struct {
	mu   sync.Mutex
	byNd map[string]endpoint
}

// answerEndpoint answers another member's methodEndpoint call.
func (s *Server) answerEndpoint(context.Context, []byte) ([]byte, error) {
	s.advMu.Lock()
	e := endpoint{Host: s.advHost, Port: s.advPort, TLSPort: s.advTLSPort}
	s.advMu.Unlock()
	return json.Marshal(e)
}

// nodeEndpoint returns the host and port node advertises to a client
// connected plain or over TLS.
func (s *Server) nodeEndpoint(ctx context.Context, node string, overTLS bool) (string, int, error) {
	if s.cfg.Nodes == nil {
		return "", 0, fmt.Errorf("stream: no cluster to reach node %s", node)
	}
	if !s.cfg.Nodes.NodeRunning(node) {
		return "", 0, fmt.Errorf("stream: node %s is down", node)
	}
	s.eps.mu.Lock()
	e, ok := s.eps.byNd[node]
	s.eps.mu.Unlock()
	if !ok || time.Since(e.at) > endpointTTL {
		cctx, cancel := context.WithTimeout(ctx, endpointWait)
		data, err := s.cfg.Nodes.CallNode(cctx, node, methodEndpoint, nil)
		cancel()
		if err != nil {
			return "", 0, fmt.Errorf("stream: asking node %s for its address: %w", node, err)
		}
		e = endpoint{}
		if err := json.Unmarshal(data, &e); err != nil || e.Host == "" {
			return "", 0, fmt.Errorf("stream: node %s answered no address (%v)", node, err)
		}
		e.at = time.Now()
		s.eps.mu.Lock()
		if s.eps.byNd == nil {
			s.eps.byNd = map[string]endpoint{}
		}
		s.eps.byNd[node] = e
		s.eps.mu.Unlock()
	}
	if overTLS {
		if e.TLSPort == 0 {
			return "", 0, fmt.Errorf("stream: node %s has no TLS listener", node)
		}
		return e.Host, e.TLSPort, nil
	}
	if e.Port == 0 {
		return "", 0, fmt.Errorf("stream: node %s has no plain listener", node)
	}
	return e.Host, e.Port, nil
}

// metadata answers the metadata command: each stream's leader is this
// node (reference 0) or the member that holds it, by the address that
// member advertises; a stream whose node does not answer is
// stream-not-available, one that does not exist stream-does-not-exist.
func (c *conn) metadata(m *proto.Metadata) {
	host, port := c.srv.advertised(c.overTLS)
	resp := &proto.MetadataResponse{CorrelationID: m.CorrelationID, Brokers: []proto.Broker{{Reference: 0, Host: host, Port: uint32(port)}}}
	refs, down := map[string]uint16{}, map[string]bool{}
	for _, name := range m.Streams {
		sm := proto.StreamMetadata{Stream: name, Code: codeOK}
		_, node, code := c.locate(name)
		switch {
		case code == codeOK && node == "":
		case code == codeOK:
			ref, ok := refs[node]
			if !ok && down[node] {
				sm.Code, sm.Leader = proto.CodeStreamNotAvailable, 0xFFFF
				break
			}
			if !ok {
				h, p, err := c.srv.nodeEndpoint(c.ctx, node, c.overTLS)
				if err != nil {
					c.srv.log.Debug("stream: metadata for a stream on another node", "stream", name, "node", node, "err", err)
					down[node] = true
					sm.Code, sm.Leader = proto.CodeStreamNotAvailable, 0xFFFF
					break
				}
				ref = uint16(len(resp.Brokers))
				refs[node] = ref
				resp.Brokers = append(resp.Brokers, proto.Broker{Reference: ref, Host: h, Port: uint32(p)})
			}
			sm.Leader = ref
		default:
			sm.Code, sm.Leader = code, 0xFFFF
		}
		resp.Streams = append(resp.Streams, sm)
	}
	c.out.send(resp)
}
