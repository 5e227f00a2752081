package server_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/tmpfs"
)

// probe GETs path on n's HTTP API, as guest unless anonymous, and returns
// the status and the answer's reason.
func probe(t *testing.T, n *brokertest.Node, path string, anonymous bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, n.HTTPURL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !anonymous {
		req.SetBasicAuth("guest", "guest")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var body struct {
		Reason string `json:"reason"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Reason
}

// A join whose reset cannot start the metadata group again (the disk of
// its snapshots went read-only: they can be neither removed nor written)
// leaves the node without metadata until it restarts, and the node says so
// wherever an operator or a probe looks: the join's answer; /readyz, the
// operator's readiness probe, and /healthz, its liveness probe (whose
// restart is the cure); and every /api route, /api/health/checks/*
// included, which answers 503 with the reason instead of refusing
// credentials it has no user table to check. Its client listeners stay
// closed (a client retries elsewhere rather than being refused its login).
// Restarted with the disk writable again, it is a node of its own again
// and joins.
func TestJoinThatLeavesTheNodeWithoutMetadataFailsItsHealth(t *testing.T) {
	c := brokertest.StartCluster(t, 1)
	target := c.Nodes[0].ClusterAddr().String()
	cfg := brokertest.Config(t.TempDir())
	cfg.Cluster.NodeName = "warren@n2"
	snapshots := filepath.Join(cfg.DataDir, "meta") // the metadata's snapshots are in meta/meta-raft
	tmpfs.MountAt(t, snapshots, 1<<20)
	lone := brokertest.StartConfig(t, cfg)
	lone.Cfg.Cluster.Listen = lone.ClusterAddr().String()
	amqpURL := lone.URL()
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, reason := probe(t, lone, path, true); code != http.StatusOK {
			t.Fatalf("%s before the join: %d %s", path, code, reason)
		}
	}

	tmpfs.ReadOnly(t, snapshots)
	code, reason := joinAPI(t, lone, target)
	if code/100 == 2 || !strings.Contains(reason, "restart the node") {
		t.Fatalf("join with the snapshots' disk read-only: %d %q, want an error saying to restart the node", code, reason)
	}
	const want = "this node has no metadata until it restarts"
	for _, tc := range []struct {
		path      string
		anonymous bool
	}{
		{"/readyz", true},
		{"/healthz", true},
		{"/api/health/checks/ready", false},
		{"/api/health/checks/virtual-hosts", false},
		{"/api/health/checks/alarms", false},
		{"/api/health/checks/node-is-quorum-critical", false},
		{"/api/overview", false},
	} {
		code, reason := probe(t, lone, tc.path, tc.anonymous)
		if code != http.StatusServiceUnavailable || !strings.Contains(reason, want) {
			t.Errorf("%s: %d %q, want 503 saying %q", tc.path, code, reason, want)
		}
	}
	if code, _ := probe(t, lone, "/api/overview", true); code != http.StatusUnauthorized {
		t.Errorf("/api/overview without credentials: %d, want 401", code)
	}
	if conn, err := amqp091.Dial(amqpURL); err == nil {
		conn.Close()
		t.Error("the node without metadata takes AMQP clients")
	}

	tmpfs.Writable(t, snapshots)
	lone = lone.Restart()
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, reason := probe(t, lone, path, true); code != http.StatusOK {
			t.Errorf("%s after the restart: %d %s", path, code, reason)
		}
	}
	if code, reason := joinAPI(t, lone, target); code != http.StatusNoContent {
		t.Fatalf("join after the restart: %d %s", code, reason)
	}
}
