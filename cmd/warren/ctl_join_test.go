package main

import (
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/config"
)

// `warren ctl join ADDRESS` on a node alone makes it a member of the
// cluster at ADDRESS: `cluster-status` on the joined node then lists both
// as running voters. Joining again is refused with the reason.
func TestCtlJoin(t *testing.T) {
	c := brokertest.StartCluster(t, 1)
	lone := brokertest.Start(t, func(cfg *config.Config) { cfg.Cluster.NodeName = "warren@lone" })
	addr := c.Nodes[0].ClusterAddr().String()
	if _, stderr, err := runCtl(t, lone, "join", addr); err != nil {
		t.Fatalf("join: %v\n%s", err, stderr)
	}
	out, stderr, err := runCtl(t, lone, "cluster-status")
	if err != nil {
		t.Fatalf("cluster-status: %v\n%s", err, stderr)
	}
	for _, name := range []string{"warren@n1", "warren@lone"} {
		if !strings.Contains(out, name) {
			t.Errorf("cluster-status does not list %s:\n%s", name, out)
		}
	}
	if strings.Count(out, "voter") != 2 || strings.Contains(out, "not running") {
		t.Errorf("want two running voters:\n%s", out)
	}
	_, stderr, err = runCtl(t, lone, "join", addr)
	if err == nil || !strings.Contains(stderr+err.Error(), "member of a cluster of 2") {
		t.Errorf("a second join: %v\n%s", err, stderr)
	}
}
