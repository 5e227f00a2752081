package brokerapi

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// ClusterStatus is GET /api/cluster/status: the cluster as the answering
// node sees it.
type ClusterStatus struct {
	// Node is the node that answered.
	Node string `json:"node"`
	// MetadataLeader is the metadata group's leader; empty during an
	// election or when no majority of the members is reachable.
	MetadataLeader string        `json:"metadata_leader"`
	Nodes          []ClusterNode `json:"nodes"`
}

// ClusterNode is one member as the answering node sees it.
type ClusterNode struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	// Voter: a voting member of the metadata group (false while joining).
	Voter bool `json:"voter"`
	// Running: the answering node reaches it.
	Running bool `json:"running"`
	// BeingDrained: it takes no clients and leads no group.
	BeingDrained bool `json:"being_drained"`
}

// Member returns the member named name.
func (s ClusterStatus) Member(name string) (ClusterNode, bool) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return ClusterNode{}, false
}

// ClusterStatus asks the node for its view of the cluster.
func (c *Client) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	var st ClusterStatus
	err := c.do(ctx, http.MethodGet, "/api/cluster/status", nil, &st)
	return st, err
}

// MembershipChangeTimeout bounds Decommission and ForgetNode: the broker
// bounds a membership change at two minutes, this leaves room for the
// answer.
const MembershipChangeTimeout = 150 * time.Second

// Decommission makes the node drain, move its memberships to other nodes
// and leave the cluster; it returns once the node has left. The node keeps
// running (stop it afterwards).
func (c *Client) Decommission(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, MembershipChangeTimeout)
	defer cancel()
	return c.slow().do(ctx, http.MethodPost, "/api/cluster/decommission", nil, nil)
}

// ForgetNode removes a stopped member from the cluster for good.
func (c *Client) ForgetNode(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, MembershipChangeTimeout)
	defer cancel()
	return c.slow().do(ctx, http.MethodDelete, "/api/cluster/nodes/"+url.PathEscape(name), nil, nil)
}

// slow is c for a call bounded by its context rather than the default
// client's 10 s timeout.
func (c *Client) slow() *Client {
	if c.HTTP != nil {
		return c
	}
	cp := *c
	cp.HTTP = &http.Client{}
	return &cp
}
