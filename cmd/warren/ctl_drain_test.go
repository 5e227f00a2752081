package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

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

// The only member of its cluster drains as well (a single-replica Broker's
// preStop hook): nothing to move, it says so, and it stops taking AMQP
// clients while its HTTP API still answers and shows it drained.
func TestCtlDrainTheOnlyMember(t *testing.T) {
	n := brokertest.Start(t)
	out, stderr, err := runCtl(t, n, "drain", "--delay", "100ms")
	if err != nil {
		t.Fatalf("drain of the only member: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "only member of its cluster") {
		t.Errorf("drain of the only member said %q, want it named the only member", out)
	}
	if conn, err := amqp091.Dial(n.URL()); err == nil {
		_ = conn.Close()
		t.Error("the drained node still takes AMQP clients")
	}
	var st struct {
		Nodes []struct {
			BeingDrained bool `json:"being_drained"`
		} `json:"nodes"`
	}
	if code := n.API(t, http.MethodGet, "/api/cluster/status", nil, &st); code != http.StatusOK || len(st.Nodes) != 1 || !st.Nodes[0].BeingDrained {
		t.Errorf("cluster status after the drain: %d %+v, want the one node drained", code, st)
	}
	// A second drain (the hook again) succeeds as well.
	if _, stderr, err := runCtl(t, n, "--quiet", "drain"); err != nil {
		t.Errorf("second drain: %v\n%s", err, stderr)
	}
}
