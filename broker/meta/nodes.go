package meta

import "context"

// Node is a member of the cluster as the metadata knows it: its stable
// name (cluster.node_name, the Raft server id) and the host:port of its
// cluster listener (cluster.advertise). Every node dials its peers by
// looking their names up here, so a Raft configuration holds names only
// and survives address changes.
//
// ID is the node's incarnation: random, made with its data directory. A
// node that comes back with the same name and another ID lost its disk
// (and with it its Raft votes) and must not be taken for the old member.
type Node struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	ID      string `json:"id,omitempty"`
	// Draining: the node was drained (warren ctl drain, decommission): it
	// takes no clients and leads no group until it restarts.
	Draining bool `json:"draining,omitempty"`
}

// PutNode implements Store.
func (l *Local) PutNode(ctx context.Context, n Node) error {
	return l.apply(ctx, Command{Op: OpPutNode, Node: &n})
}

// DeleteNode implements Store.
func (l *Local) DeleteNode(ctx context.Context, name string) error {
	return l.apply(ctx, Command{Op: OpDeleteNode, Name: name})
}

// Nodes implements Store.
func (l *Local) Nodes() []Node {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return sortedValues(l.state.Nodes, nil)
}
