package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/raftgroup"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// A write on a node cut off from the majority ends with ErrUnavailable
// after the write bound, not when the partition heals: a client's
// connection waiting on it gets an answer.
func TestRaftWriteWithoutAMajorityEndsAtTheBound(t *testing.T) {
	hub := transport.NewInmemHub()
	stores := []logstore.GroupStores{logstore.NewInmem(), logstore.NewInmem(), logstore.NewInmem()}
	c := newRaftClusterNet(t, stores, raftgroup.Timing{}, inmemNetworks{hub})
	must(t, c.leader().r.PutVhost(ctxT(t), Vhost{Name: "v"}))
	f := c.follower()
	f.r.Close()
	r, err := OpenRaft(ctxT(t), RaftConfig{Dir: f.dir, Network: hub.Network(f.name), Stores: f.stores, Logger: c.logger, WriteTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	hub.Isolate(f.name)
	start := time.Now()
	err = r.PutVhost(context.Background(), Vhost{Name: "cut-off"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write on a cut-off node: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the write took %v with a bound of 300ms", took)
	}
	// A caller's own earlier deadline is the caller's error, not ours.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.PutVhost(ctx, Vhost{Name: "cut-off"}); errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write with the caller's deadline: %v", err)
	}
	hub.Heal()
}
