//go:build linux

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// ClusterStatus is a node's GET /api/cluster/status (warren ctl
// cluster-status): the metadata group's leader as that node knows it ("" in
// an election or without a majority) and the members.
type ClusterStatus struct {
	Node           string          `json:"node"`
	MetadataLeader string          `json:"metadata_leader"`
	Nodes          []ClusterMember `json:"nodes"`
}

// ClusterMember is one member in a ClusterStatus.
type ClusterMember struct {
	Name         string `json:"name"`
	Address      string `json:"address"`
	Voter        bool   `json:"voter"`
	Running      bool   `json:"running"`
	BeingDrained bool   `json:"being_drained"`
}

// NodeName is node n's cluster.node_name (warren@n1), as statuses name it.
func (n *Node) NodeName() string { return "warren@" + n.Name }

// statusTimeout bounds one status request: a paused or cut-off node does
// not answer.
const statusTimeout = 2 * time.Second

// Status fetches node n's cluster status from the host.
func (c *Cluster) Status(n *Node) (ClusterStatus, error) {
	var st ClusterStatus
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	code, body, err := c.HTTP(ctx, n, http.MethodGet, "/api/cluster/status", nil)
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("%s: cluster status: %d %s", n.Name, code, body)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("%s: cluster status: %w", n.Name, err)
	}
	return st, nil
}

// HTTP sends one management API request to node n as guest (body, when not
// nil, as JSON) and returns the status code and the body.
func (c *Cluster) HTTP(ctx context.Context, n *Node, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.HTTPURL()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth("guest", "guest")
	if body != nil {
		req.Header.Set("content-type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %s %s: %w", n.Name, method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// byNodeName returns the node whose cluster.node_name is name.
func (c *Cluster) byNodeName(name string) *Node {
	for _, n := range c.Nodes {
		if n.NodeName() == name {
			return n
		}
	}
	return nil
}

// AgreedLeader asks each of nodes (every running node when none is given)
// for its metadata leader and returns the leader if they all name the same
// one and it is one of nodes; else an error saying who names whom.
func (c *Cluster) AgreedLeader(nodes ...*Node) (*Node, error) {
	if len(nodes) == 0 {
		for _, n := range c.Nodes {
			if n.running() {
				nodes = append(nodes, n)
			}
		}
	}
	named := map[string][]string{}
	var errs []error
	for _, n := range nodes {
		st, err := c.Status(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		named[st.MetadataLeader] = append(named[st.MetadataLeader], n.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(named) != 1 {
		return nil, fmt.Errorf("no agreed metadata leader: %v", leaderVotes(named))
	}
	for leader := range named {
		l := c.byNodeName(leader)
		if l == nil {
			return nil, fmt.Errorf("no agreed metadata leader: %v", leaderVotes(named))
		}
		for _, n := range nodes {
			if n == l {
				return l, nil
			}
		}
		return nil, fmt.Errorf("the metadata leader %s is not among the nodes asked", leader)
	}
	return nil, errors.New("no node asked")
}

func leaderVotes(named map[string][]string) string {
	var parts []string
	for leader, by := range named {
		if leader == "" {
			leader = `""`
		}
		parts = append(parts, fmt.Sprintf("%s says %s", strings.Join(by, ","), leader))
	}
	return strings.Join(parts, "; ")
}

// WaitLeader fails the test unless nodes (every running node when none is
// given) agree on a metadata leader among them within LeaderWithin, and
// returns it.
func (c *Cluster) WaitLeader(nodes ...*Node) *Node {
	c.t.Helper()
	var l *Node
	eventually.Succeeds(c.t, LeaderWithin, "an agreed metadata leader", func() (err error) {
		l, err = c.AgreedLeader(nodes...)
		return err
	})
	return l
}

// MetadataLeaderProbe is a LeaderProbe for WaitLeaders from GET
// /api/cluster/status: node n knows a metadata leader and every running
// node names the same one (the metadata group is the only Raft group a node
// hosts today).
func (c *Cluster) MetadataLeaderProbe(n *Node) (bool, error) {
	st, err := c.Status(n)
	if err != nil {
		return false, err
	}
	if st.MetadataLeader == "" {
		return false, nil
	}
	if _, err := c.AgreedLeader(); err != nil {
		return false, err
	}
	return true, nil
}
