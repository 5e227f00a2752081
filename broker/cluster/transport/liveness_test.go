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
// hears its pings and sends none, and its ping timer, pushed back by each
// of them, does not even fire. The interval is long enough (n2 waits
// 500 ms longer than n1) that a loaded machine's late timers do not make
// n2 ping; one such ping (or wakeup) is tolerated.
func TestIdlePairPingsOneWay(t *testing.T) {
	a, b := idlePair(t, time.Second)
	a0, b0 := a.Stats().PingsSent, b.Stats().PingsSent
	aw0, bw0 := a.stats.pingWakes.Load(), b.stats.pingWakes.Load()
	time.Sleep(4500 * time.Millisecond)
	pa, pb := a.Stats().PingsSent-a0, b.Stats().PingsSent-b0
	aw, bw := a.stats.pingWakes.Load()-aw0, b.stats.pingWakes.Load()-bw0
	t.Logf("over 4.5 s at a 1 s interval: n1 sent %d pings (%d wakeups), n2 %d (%d)", pa, aw, pb, bw)
	if pa < 2 {
		t.Errorf("n1 sent %d pings in 4.5 s, want about 4", pa)
	}
	if pb > 1 {
		t.Errorf("n2 sent %d pings while n1 sent %d: both ping", pb, pa)
	}
	if aw > pa+1 {
		t.Errorf("n1's ping timer fired %d times for %d pings: it wakes between them", aw, pa)
	}
	if bw > 1 {
		t.Errorf("n2's ping timer fired %d times while it heard n1's pings, want none", bw)
	}
}

// Traffic stands for the node heartbeat: while calls flow from n1 to n2
// (requests for n2, answers for n1), neither pings, and neither's ping
// timer fires (each frame pushes it back). Calls go every 10 ms against a
// 1 s interval, so only a call that takes most of a second on a loaded
// machine lets one ping out; idle, n1 would send about 4.
func TestTrafficSuppressesPings(t *testing.T) {
	a, b := idlePair(t, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	a0, b0 := a.Stats().PingsSent, b.Stats().PingsSent
	aw0, bw0 := a.stats.pingWakes.Load(), b.stats.pingWakes.Load()
	calls := 0
	for ctx.Err() == nil {
		if _, err := a.Call(ctx, "n2", "echo", []byte("x")); err == nil {
			calls++
		}
		time.Sleep(10 * time.Millisecond)
	}
	pa, pb := a.Stats().PingsSent-a0, b.Stats().PingsSent-b0
	aw, bw := a.stats.pingWakes.Load()-aw0, b.stats.pingWakes.Load()-bw0
	t.Logf("%d calls in 4 s; pings: n1 %d, n2 %d; ping timer wakeups: n1 %d, n2 %d", calls, pa, pb, aw, bw)
	if pa+pb > 1 {
		t.Errorf("%d and %d pings while calls flowed, want none", pa, pb)
	}
	if aw+bw > 1 {
		t.Errorf("ping timers fired %d and %d times while calls flowed, want none", aw, bw)
	}
}
