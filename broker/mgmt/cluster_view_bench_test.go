package mgmt_test

import (
	"context"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
)

// BenchmarkListConnectionsOneNode is GET /api/connections on a node
// alone (10 connections), and the cluster status read it costs: a cluster
// of one makes no call, only that read.
func BenchmarkListConnectionsOneNode(b *testing.B) {
	n := brokertest.Start(b)
	for range 10 {
		n.Dial(b)
	}
	b.Run("GET /api/connections", func(b *testing.B) {
		var rows []map[string]any
		for b.Loop() {
			if code := n.API(b, "GET", "/api/connections", nil, &rows); code != 200 || len(rows) != 10 {
				b.Fatal(code, len(rows))
			}
		}
	})
	b.Run("ClusterStatus", func(b *testing.B) {
		for b.Loop() {
			if _, err := n.ClusterStatus(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
