package meta

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/raftgroup"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// BenchmarkRaftPutQueue: queue declares per second from 64 concurrent
// writers spread over every member (a follower's are forwarded to the
// leader), on the in-memory transport (and on the gRPC Network over
// loopback) and the real log store (fdatasync per log write), default
// timing but fast elections:
//
//	go test -run '^$' -bench BenchmarkRaftPutQueue -benchtime 1s ./broker/meta/
func BenchmarkRaftPutQueue(b *testing.B) {
	for _, bc := range []struct {
		members int
		grpc    bool
	}{{1, false}, {3, false}, {3, true}} {
		members := bc.members
		name := "members=" + strconv.Itoa(members)
		if bc.grpc {
			name += "/grpc"
		}
		b.Run(name, func(b *testing.B) {
			stores := make([]logstore.GroupStores, members)
			for i := range stores {
				s, err := logstore.Open(context.Background(), b.TempDir(), logstore.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				stores[i] = s
			}
			var nets networks = inmemNetworks{transport.NewInmemHub()}
			if bc.grpc {
				nets = newGRPCNetworks(b)
			}
			c := newRaftClusterNet(b, stores, raftgroup.Timing{HeartbeatTimeout: fastTiming.HeartbeatTimeout,
				ElectionTimeout: fastTiming.ElectionTimeout, LeaderLeaseTimeout: fastTiming.LeaderLeaseTimeout}, nets)
			ctx := context.Background()
			if err := c.leader().r.PutVhost(ctx, Vhost{Name: "/"}); err != nil {
				b.Fatal(err)
			}
			for _, nd := range c.nodes {
				if err := nd.r.Sync(ctx); err != nil {
					b.Fatal(err)
				}
			}
			const writers = 64
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range writers {
				s := c.nodes[w%members].r
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if err := s.PutQueue(ctx, Queue{Vhost: "/", Name: "q" + strconv.FormatInt(i, 10), Durable: true}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "declares/s")
		})
	}
}
