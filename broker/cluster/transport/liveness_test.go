package transport

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// idlePair starts two gRPC Networks that know each other's address, with
// the given ping interval, and waits until each reports the other up.
func idlePair(t *testing.T, interval time.Duration) (a, b *GRPCNetwork) {
	t.Helper()
	fast := func(c *Config) { c.PingInterval, c.PingTimeout = interval, 5*interval }
	a, b = grpcNet(t, "n1", fast), grpcNet(t, "n2", fast)
	b.Handle("echo", echo)
	for _, x := range []struct {
		from, to *GRPCNetwork
	}{{a, b}, {b, a}} {
		var mu sync.Mutex
		up := false
		stop := x.from.Watch(func(node string, u bool) {
			mu.Lock()
			defer mu.Unlock()
			up = node == x.to.Node() && u
		})
		must(t, x.from.SetAddress(x.to.Node(), x.to.Addr().String()))
		eventually.True(t, 10*time.Second, x.to.Node()+" up", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return up
		})
		stop()
	}
	return a, b
}

// Of two idle nodes only the one whose name sorts first pings: the other
// hears its pings and sends (almost) none.
func TestIdlePairPingsOneWay(t *testing.T) {
	a, b := idlePair(t, 200*time.Millisecond)
	a0, b0 := a.Stats().PingsSent, b.Stats().PingsSent
	time.Sleep(3 * time.Second)
	pa, pb := a.Stats().PingsSent-a0, b.Stats().PingsSent-b0
	t.Logf("over 3 s at a 200 ms interval: n1 sent %d pings, n2 %d", pa, pb)
	if pa < 5 {
		t.Errorf("n1 sent %d pings in 3 s, want about 15", pa)
	}
	if pb*2 > pa { // late timers on a loaded machine make n2 ping now and then
		t.Errorf("n2 sent %d pings while n1 sent %d: both ping", pb, pa)
	}
}

// Traffic stands for the node heartbeat: while calls flow from n1 to n2
// (requests for n2, answers for n1), neither pings.
func TestTrafficSuppressesPings(t *testing.T) {
	a, b := idlePair(t, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	a0, b0 := a.Stats().PingsSent, b.Stats().PingsSent
	calls := 0
	for ctx.Err() == nil {
		if _, err := a.Call(ctx, "n2", "echo", []byte("x")); err == nil {
			calls++
		}
		time.Sleep(10 * time.Millisecond)
	}
	pa, pb := a.Stats().PingsSent-a0, b.Stats().PingsSent-b0
	t.Logf("%d calls in 3 s; pings: n1 %d, n2 %d", calls, pa, pb)
	if pa+pb > 2 { // idle, n1 alone would send about 6
		t.Errorf("%d and %d pings while calls flowed, want (almost) none", pa, pb)
	}
}
