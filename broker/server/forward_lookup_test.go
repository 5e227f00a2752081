package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/vhost"
)

// The owner's lookup for a forwarded publish (made on the reader of a
// peer's data stream) never waits for the broker's vhosts lock, which a
// vhost's start holds across its recovery: it answers "not ready" at once
// while the lock is held, and finds the queue once it is released.
func TestForwardLookupDoesNotWaitForAVhostStart(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	b := n.Broker

	release := b.HoldVhosts()
	answered := make(chan bool, 1)
	go func() {
		_, ready, _ := b.ForwardLookupNow("/", "q")
		answered <- ready
	}()
	select {
	case ready := <-answered:
		release()
		if ready {
			t.Fatal("the lookup was ready while the vhosts lock was held")
		}
	case <-time.After(5 * time.Second):
		release()
		t.Fatal("the lookup waited for the vhosts lock")
	}

	if found, ready, err := b.ForwardLookupNow("/", "q"); !found || !ready || err != nil {
		t.Fatalf("lookup of an open queue: found %v ready %v err %v", found, ready, err)
	}
	if _, ready, err := b.ForwardLookupNow("nope", "q"); !ready || !errors.Is(err, vhost.ErrNotFound) {
		t.Fatalf("lookup in no vhost: ready %v err %v, want ready and NOT_FOUND", ready, err)
	}
	if _, ready, err := b.ForwardLookupNow("/", "nope"); !ready || !errors.Is(err, vhost.ErrNotFound) {
		t.Fatalf("lookup of no queue: ready %v err %v, want ready and NOT_FOUND", ready, err)
	}
}
