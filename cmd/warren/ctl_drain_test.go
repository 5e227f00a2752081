package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest"
)

// `warren ctl drain --delay D` (the operator's preStop hook) waits D, then
// drains the node: it is drained afterwards, and not before D passed.
func TestCtlDrainDelay(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	n := c.Nodes[1]
	start := time.Now()
	if _, stderr, err := runCtl(t, n, "--quiet", "drain", "--delay", "1s"); err != nil {
		t.Fatalf("drain: %v\n%s", err, stderr)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("drained after %v, before the 1s delay", waited)
	}
	var st struct {
		Nodes []struct {
			Name         string `json:"name"`
			BeingDrained bool   `json:"being_drained"`
		} `json:"nodes"`
	}
	if code := n.API(t, http.MethodGet, "/api/cluster/status", nil, &st); code != http.StatusOK {
		t.Fatalf("cluster status: %d", code)
	}
	drained := false
	for _, m := range st.Nodes {
		if m.Name == "warren@n2" {
			drained = m.BeingDrained
		}
	}
	if !drained {
		b, _ := json.Marshal(st)
		t.Errorf("node n2 not drained: %s", b)
	}
}
