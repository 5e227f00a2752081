package brokertest

import (
	"fmt"
	"testing"

	"github.com/warrenmq/warren/broker/config"
)

// Cluster is n real nodes in one test process, each with its own data
// directory and listeners on 127.0.0.1, joined into one cluster: node 0
// forms it, the others join with node 0 as their seed.
type Cluster struct {
	t     testing.TB
	Nodes []*Node
}

// StartCluster starts n nodes (named warren@n1 .. warren@nN) with
// Config(t.TempDir()) changed by opts, one after the other, each returning
// once it is a member with the metadata caught up. The nodes stop when the
// test ends.
func StartCluster(t testing.TB, n int, opts ...func(*config.Config)) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	var seed string
	for i := range n {
		cfg := Config(t.TempDir())
		cfg.Cluster.NodeName = fmt.Sprintf("warren@n%d", i+1)
		if seed != "" {
			cfg.Cluster.Seeds = []string{seed}
		}
		for _, o := range opts {
			o(&cfg)
		}
		node := StartConfig(t, cfg)
		// A restart keeps the node's cluster address: its peers know it.
		node.Cfg.Cluster.Listen = node.ClusterAddr().String()
		if seed == "" {
			seed = node.Cfg.Cluster.Listen
		}
		c.Nodes = append(c.Nodes, node)
	}
	return c
}

// Stop stops node i cleanly (it drains first, as on SIGTERM).
func (c *Cluster) Stop(i int) { c.Nodes[i].Stop() }

// Restart starts node i again on its data directory and cluster address
// (its client listeners get new ports) and returns it.
func (c *Cluster) Restart(i int) *Node {
	c.t.Helper()
	c.Nodes[i].Stop()
	c.Nodes[i] = StartConfig(c.t, c.Nodes[i].Cfg)
	return c.Nodes[i]
}
