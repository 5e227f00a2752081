package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
)

// nodeTotals is what one node adds to the overview: its queues' totals
// by vhost, its connections and channels counted by user, its message and
// churn counters and its listeners. The answering node cuts the vhosts
// and users to what the caller may see, then sums.
type nodeTotals struct {
	Vhosts      map[string]vhostTotals `json:"vhosts"`
	Connections map[string]int         `json:"connections"`
	Channels    map[string]int         `json:"channels"`
	Global      counts                 `json:"global"`
	Churn       counts                 `json:"churn"`
	Listeners   []map[string]any       `json:"listeners"`
}

// vhostTotals is a node's queues in one vhost, summed.
type vhostTotals struct {
	Queues    int    `json:"queues"`
	Consumers int    `json:"consumers"`
	Ready     int    `json:"ready"`
	Unacked   int    `json:"unacked"`
	Stats     counts `json:"stats"`
}

// counts is a set of counters with their rates, in the order of a list
// of names (globalStats, queueStats, churnStats).
type counts struct {
	C []uint64  `json:"c"`
	R []float64 `json:"r"`
}

func newCounts(n int) counts { return counts{C: make([]uint64, n), R: make([]float64, n)} }

// add adds b into a, within a's length (a member's answer is peer input).
func (a counts) add(b counts) {
	for i := range min(len(a.C), len(b.C)) {
		a.C[i] += b.C[i]
	}
	for i := range min(len(a.R), len(b.R)) {
		a.R[i] += b.R[i]
	}
}

// localTotals is this node's nodeTotals.
func (s *Server) localTotals() nodeTotals {
	t := nodeTotals{Vhosts: map[string]vhostTotals{}, Connections: map[string]int{}, Channels: map[string]int{},
		Global: s.globalCounts(), Churn: s.churnCounters(), Listeners: s.listenersJSON()}
	for _, v := range s.b.VhostList() {
		vt := vhostTotals{Stats: newCounts(len(queueStats))}
		for _, q := range v.Queues() {
			st := q.Stats()
			vt.Queues++
			vt.Consumers += st.Consumers
			vt.Ready += st.Ready
			vt.Unacked += st.Unacked
			vt.Stats.add(s.queueCounts(v.Name(), q.Info().Name, st.Published, st.Delivered, st.Acked))
		}
		t.Vhosts[v.Name()] = vt
	}
	for _, c := range s.b.Connections() {
		t.Connections[c.User]++
	}
	for _, c := range s.b.Channels() {
		t.Channels[c.User]++
	}
	return t
}

// clusterTotals is every answering member's nodeTotals (this node's
// first), the nodes that answered, and whether there were others to ask.
func (s *Server) clusterTotals(ctx context.Context) ([]nodeTotals, map[string]bool, bool) {
	self := s.b.NodeName()
	all := []nodeTotals{s.localTotals()}
	answered := map[string]bool{self: true}
	peers := s.peers(ctx)
	for node, data := range s.askPeers(ctx, peers, methodItems, itemsRequest{Kind: kindTotals}) {
		t, err := decodeTotals(node, data)
		if err != nil {
			s.log.Warn("mgmt: a member's totals do not decode; it is left out", "node", node, "err", err)
			continue
		}
		answered[node] = true
		all = append(all, t)
	}
	return all, answered, len(peers) > 0
}

// decodeTotals reads a member's answer to a kindTotals ask (peer input:
// a bad one is an error, never a panic; counts.add ignores counters
// beyond the names).
func decodeTotals(node string, data []byte) (nodeTotals, error) {
	var t nodeTotals
	if err := json.Unmarshal(data, &t); err != nil {
		return nodeTotals{}, fmt.Errorf("mgmt: totals from %s: %w", node, err)
	}
	return t, nil
}

// listenersJSON is the node's listeners as the overview lists them.
func (s *Server) listenersJSON() []map[string]any {
	var out []map[string]any
	for proto, addr := range s.b.Listeners() {
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		out = append(out, map[string]any{"node": s.b.NodeName(), "protocol": rabbitProtocol(proto), "ip_address": host, "port": p})
	}
	return out
}

// sortListeners orders listeners by node, then protocol.
func sortListeners(ls []map[string]any) {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	sort.SliceStable(ls, func(i, j int) bool {
		if a, b := str(ls[i], "node"), str(ls[j], "node"); a != b {
			return a < b
		}
		return str(ls[i], "protocol") < str(ls[j], "protocol")
	})
}
