package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/meta"
)

// The cluster view: the lists of queues, connections, channels and
// consumers and the overview's totals show the whole cluster. The
// answering node asks every other running member for its local items with
// one node-level call per member (methodItems), in parallel, each within
// memberCallTimeout; a member that does not answer is left out and the
// answer still comes. Each member renders its own items (stats, rates,
// peers are only known where the object lives) and sends them uncut, with
// the user and vhost they belong to: the answering node, which has the
// caller, applies the authorization cut, merges, sorts and writes them. A
// cluster of one makes no call.

const (
	// methodItems answers another member's ask for this node's items of a
	// kind (itemsRequest); the answer is a JSON []wireItem, or nodeTotals
	// for kindTotals.
	methodItems = "mgmt.items"
	// methodCloseConnection closes one of this node's connections for a
	// member whose API was asked to (closeRequest); NotFound if it has none
	// of that name.
	methodCloseConnection = "mgmt.close_connection"
	// memberCallTimeout bounds each member's answer to a list request.
	memberCallTimeout = 2 * time.Second
)

// What a member is asked for.
const (
	kindQueues      = "queues"
	kindConnections = "connections"
	kindChannels    = "channels"
	kindConsumers   = "consumers"
	kindTotals      = "totals"
)

// itemsRequest is methodItems' request: a kind, optionally only one
// vhost's items (One) and, for queues, one name.
type itemsRequest struct {
	Kind  string `json:"kind"`
	Vhost string `json:"vhost,omitempty"`
	One   bool   `json:"one,omitempty"`
	Name  string `json:"name,omitempty"`
}

// item is one listed object as the node that holds it rendered it, with
// what the answering node sorts (Key) and cuts (User, Vhost) by.
type item struct {
	Key   string `json:"k"`
	User  string `json:"u,omitempty"`
	Vhost string `json:"v"`
	Body  any    `json:"b"`
	// Node is the node that holds it (set by the answering node).
	Node string `json:"-"`
}

// wireItem is an item as another member sent it: its body is written out
// as received.
type wireItem struct {
	Key   string          `json:"k"`
	User  string          `json:"u"`
	Vhost string          `json:"v"`
	Body  json.RawMessage `json:"b"`
}

// closeRequest is methodCloseConnection's request.
type closeRequest struct {
	Name   string `json:"name"`
	Reason string `json:"reason,omitempty"`
}

// peers lists the other members this node reaches (none in a cluster of
// one, or when the cluster's state cannot be read: the node then answers
// for itself).
func (s *Server) peers(ctx context.Context) []string {
	st, err := s.b.ClusterStatus(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range st.Nodes {
		if n.Running && n.Name != s.b.NodeName() {
			out = append(out, n.Name)
		}
	}
	return out
}

// askPeers sends req to method on every node of peers at once and returns
// the answers of those that answered within memberCallTimeout, by node.
func (s *Server) askPeers(ctx context.Context, peers []string, method string, req any) map[string][]byte {
	if len(peers) == 0 {
		return nil
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = make(map[string][]byte, len(peers))
	)
	for _, node := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ans, err := s.b.CallNode(ctx, node, method, data)
			if err != nil {
				s.log.Debug("mgmt: a member did not answer; it is left out", "node", node, "method", method, "err", err)
				return
			}
			mu.Lock()
			out[node] = ans
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// gather is the cluster's items of req's kind, sorted by key, and the
// nodes that answered (this one included). peersAsked is false in a
// cluster of one.
func (s *Server) gather(ctx context.Context, req itemsRequest) (items []item, answered map[string]bool, peersAsked bool) {
	self := s.b.NodeName()
	items = s.localItems(req)
	for i := range items {
		items[i].Node = self
	}
	answered = map[string]bool{self: true}
	peers := s.peers(ctx)
	for node, data := range s.askPeers(ctx, peers, methodItems, req) {
		got, err := decodeItems(node, data)
		if err != nil {
			s.log.Warn("mgmt: a member's items do not decode; it is left out", "node", node, "err", err)
			continue
		}
		answered[node] = true
		items = append(items, got...)
	}
	if len(peers) > 0 {
		sort.SliceStable(items, func(i, j int) bool { return items[i].Key < items[j].Key })
	}
	return items, answered, len(peers) > 0
}

// decodeItems reads a member's answer to methodItems (peer input: a bad
// one is an error, never a panic); items without a body are dropped.
func decodeItems(node string, data []byte) ([]item, error) {
	var got []wireItem
	if err := json.Unmarshal(data, &got); err != nil {
		return nil, fmt.Errorf("mgmt: items from %s: %w", node, err)
	}
	out := make([]item, 0, len(got))
	for _, w := range got {
		if len(w.Body) == 0 || string(w.Body) == "null" {
			continue
		}
		out = append(out, item{Key: w.Key, User: w.User, Vhost: w.Vhost, Body: w.Body, Node: node})
	}
	return out, nil
}

// answerItems answers another member's methodItems call.
func (s *Server) answerItems(ctx context.Context, data []byte) ([]byte, error) {
	var req itemsRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "mgmt: items request: %v", err)
	}
	switch req.Kind {
	case kindQueues, kindConnections, kindChannels, kindConsumers:
		items := s.localItems(req)
		if items == nil {
			items = []item{}
		}
		return json.Marshal(items)
	case kindTotals:
		return json.Marshal(s.localTotals())
	}
	return nil, status.Errorf(codes.InvalidArgument, "mgmt: unknown item kind %q", req.Kind)
}

// localItems renders this node's items of req's kind, sorted by key.
func (s *Server) localItems(req itemsRequest) []item {
	var out []item
	node := s.b.NodeName()
	switch req.Kind {
	case kindQueues:
		for _, v := range s.b.VhostList() {
			if req.One && v.Name() != req.Vhost {
				continue
			}
			for _, q := range v.Queues() {
				name := q.Info().Name
				if req.Name != "" && name != req.Name {
					continue
				}
				out = append(out, item{Key: queueSortKey(v.Name(), name), Vhost: v.Name(), Body: s.queueJSON(q)})
			}
		}
	case kindConnections:
		for _, c := range s.b.Connections() {
			if req.One && c.Vhost != req.Vhost {
				continue
			}
			out = append(out, item{Key: c.Name, User: c.User, Vhost: c.Vhost, Body: connectionJSON(c, node)})
		}
	case kindChannels:
		conns := s.connectionsByName()
		for _, c := range s.b.Channels() {
			out = append(out, item{Key: fmt.Sprintf("%s\x00%05d", c.Connection, c.Number), User: c.User, Vhost: c.Vhost, Body: s.channelJSON(c, conns)})
		}
	case kindConsumers:
		conns := s.connectionsByName()
		for _, c := range s.b.Consumers() {
			if req.One && c.Vhost != req.Vhost {
				continue
			}
			out = append(out, item{Key: c.Queue + "\x00" + c.Tag, User: c.User, Vhost: c.Vhost, Body: consumerJSON(c, conns[c.Connection], node)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func queueSortKey(vhost, name string) string { return vhost + "\x00" + name }

// recordNode is the node that holds a queue record (records written
// before placement are this node's).
func (s *Server) recordNode(q meta.Queue) string {
	if q.Node == "" {
		return s.b.NodeName()
	}
	return q.Node
}

// downQueues is the queues of vhost whose node did not answer, from the
// metadata, listed as RabbitMQ lists the queues of a stopped node.
func (s *Server) downQueues(vhost string, answered map[string]bool) []item {
	var out []item
	for _, q := range s.b.Meta().Queues(vhost) {
		if node := s.recordNode(q); !answered[node] {
			out = append(out, item{Key: queueSortKey(vhost, q.Name), Vhost: vhost, Body: downQueueJSON(q, node), Node: node})
		}
	}
	return out
}

// downQueueJSON is a queue whose node does not answer: what the metadata
// says of it, state down.
func downQueueJSON(q meta.Queue, node string) map[string]any {
	args := q.Arguments
	if args == nil {
		args = map[string]any{}
	}
	typ := q.Type
	if typ == "" {
		typ = "classic"
	}
	return map[string]any{
		"name": q.Name, "vhost": q.Vhost, "type": typ, "durable": q.Durable, "auto_delete": q.AutoDelete,
		"exclusive": q.Exclusive, "arguments": args, "state": "down", "node": node,
	}
}

// closeConnectionAt closes a connection on the node that holds it.
func (s *Server) closeConnectionAt(ctx context.Context, node, name, reason string) error {
	if node == s.b.NodeName() {
		return s.b.CloseConnection(name, reason)
	}
	data, err := json.Marshal(closeRequest{Name: name, Reason: reason})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, memberCallTimeout)
	defer cancel()
	if _, err := s.b.CallNode(ctx, node, methodCloseConnection, data); err != nil {
		if status.Code(err) == codes.NotFound {
			return amqp.ErrNoConnection
		}
		return fmt.Errorf("close connection on node %s: %w", node, err)
	}
	return nil
}

// answerCloseConnection answers another member's methodCloseConnection
// call (the asking node checked the caller may close it).
func (s *Server) answerCloseConnection(ctx context.Context, data []byte) ([]byte, error) {
	var req closeRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "mgmt: close request: %v", err)
	}
	err := s.b.CloseConnection(req.Name, req.Reason)
	switch {
	case errors.Is(err, amqp.ErrNoConnection):
		return nil, status.Errorf(codes.NotFound, "no connection %q", req.Name)
	case err != nil:
		return nil, status.Errorf(codes.Internal, "close connection %q: %v", req.Name, err)
	}
	return nil, nil
}

// withDownQueues adds to a merged queue list the queues of the vhosts
// listed (one, or all) whose node did not answer, sorted in.
func (s *Server) withDownQueues(items []item, answered map[string]bool, vh string, one bool) []item {
	listed := make(map[string]bool, len(items))
	for _, it := range items {
		listed[it.Key] = true
	}
	added := false
	for _, v := range s.b.VhostList() {
		if one && v.Name() != vh {
			continue
		}
		for _, d := range s.downQueues(v.Name(), answered) {
			if !listed[d.Key] {
				items = append(items, d)
				added = true
			}
		}
	}
	if added {
		sort.SliceStable(items, func(i, j int) bool { return items[i].Key < items[j].Key })
	}
	return items
}

// remoteQueue is GET /api/queues/{vhost}/{name}'s answer for a queue
// another node holds: that node's, or the metadata's with state down if
// it does not answer.
func (s *Server) remoteQueue(ctx context.Context, rec meta.Queue) (any, error) {
	node := s.recordNode(rec)
	answers := s.askPeers(ctx, []string{node}, methodItems, itemsRequest{Kind: kindQueues, Vhost: rec.Vhost, One: true, Name: rec.Name})
	data, ok := answers[node]
	if !ok {
		return downQueueJSON(rec, node), nil
	}
	got, err := decodeItems(node, data)
	if err != nil {
		return downQueueJSON(rec, node), nil
	}
	for _, it := range got {
		if it.Key == queueSortKey(rec.Vhost, rec.Name) {
			return it.Body, nil
		}
	}
	return nil, fmt.Errorf("%w: no queue '%s' in vhost '%s'", meta.ErrNotFound, rec.Name, rec.Vhost)
}

// writeNodeErr writes an error of this node (writeErr) or of a member's
// answer (a gRPC status: writeClusterError).
func writeNodeErr(w http.ResponseWriter, err error) {
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		writeClusterError(w, err)
		return
	}
	writeErr(w, err)
}
