package mgmt_test

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/config"
)

func TestNodes(t *testing.T) {
	tests := []struct {
		name          string
		diskFreeLimit int64
		wantDiskAlarm bool
	}{
		{"default limits", 0, false},
		{"disk free limit above what is free", 1 << 60, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := brokertest.Start(t, func(c *config.Config) {
				if tt.diskFreeLimit > 0 {
					c.Limits.DiskFreeLimit = tt.diskFreeLimit
				}
			})
			a := newAPI(t, n)
			var ov map[string]any
			_ = json.Unmarshal(a.must("GET", "/api/overview", nil, 200), &ov)
			n.Dial(t)
			var node map[string]any
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				nodes := a.list("/api/nodes")
				if len(nodes) != 1 {
					t.Fatalf("nodes = %v, want one", nodes)
				}
				node = nodes[0]
				if node["disk_free"] != float64(0) && node["sockets_used"] == float64(1) && node["disk_free_alarm"] == tt.wantDiskAlarm {
					break
				}
			}
			num := func(k string) float64 { f, _ := node[k].(float64); return f }
			if node["name"] != ov["node"] || node["running"] != true || node["type"] != "disc" || node["sockets_used"] != float64(1) {
				t.Errorf("node = %v (overview's node %v)", node, ov["node"])
			}
			if num("mem_used") <= 0 || num("mem_limit") <= 0 || node["mem_alarm"] != false {
				t.Errorf("memory: used %v limit %v alarm %v", node["mem_used"], node["mem_limit"], node["mem_alarm"])
			}
			if num("disk_free") <= 0 || node["disk_free_alarm"] != tt.wantDiskAlarm || (tt.diskFreeLimit > 0 && num("disk_free_limit") != float64(tt.diskFreeLimit)) {
				t.Errorf("disk: free %v limit %v alarm %v, want alarm %v", node["disk_free"], node["disk_free_limit"], node["disk_free_alarm"], tt.wantDiskAlarm)
			}
			if num("fd_used") <= 0 || num("fd_used") > num("fd_total") || num("uptime") < 0 {
				t.Errorf("fd_used %v fd_total %v uptime %v", node["fd_used"], node["fd_total"], node["uptime"])
			}
			var one map[string]any
			_ = json.Unmarshal(a.must("GET", "/api/nodes/"+url.PathEscape(node["name"].(string)), nil, 200), &one)
			if one["name"] != node["name"] {
				t.Errorf("GET /api/nodes/{name} = %v", one["name"])
			}
			a.must("GET", "/api/nodes/nobody@nowhere", nil, 404)
		})
	}
}
