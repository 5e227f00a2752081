package membership

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// Join moves a node alone into another cluster: the node at the address
// asks its leader, the node's group is reset, and the leader adds it. A
// join that fails after the reset (the node cut off from the cluster
// right then) leaves the node empty, waiting (never a cluster of its own:
// the leader may have added it), and says so; asked again it joins. A
// member of a cluster of two is refused before anything is reset.
func TestJoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := newWorld(t)
	seeds := []string{"addr-warren@a", "addr-warren@b"}
	a := w.start("warren@a", "ia", seeds, "")
	b := w.start("warren@b", "ib", seeds, "")
	startAll(t, a, b)
	c := w.start("warren@c", "ic", nil, "")
	d := w.start("warren@d", "id", nil, "")
	startAll(t, c, d)

	resets := 0
	resetOf := func(mb *member, cut bool) func(context.Context) error {
		return func(ctx context.Context) error {
			resets++
			if cut {
				w.hub.Isolate(mb.name)
			}
			return mb.group.Reset(ctx, nil)
		}
	}

	if _, err := b.m.Join(ctx, "addr-warren@c", resetOf(b, false)); err == nil || !strings.Contains(err.Error(), "member of a cluster of 2") || resets != 0 {
		t.Fatalf("a member of two joining: %v (resets %d)", err, resets)
	}

	_, err := d.m.Join(ctx, "addr-warren@a", resetOf(d, true))
	if err == nil || !strings.Contains(err.Error(), "outcome") && !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("a join cut off after the reset: %v", err)
	}
	w.hub.Heal()
	if got := voters(t, d.group); len(got) > 0 || d.group.Leader() != "" {
		t.Fatalf("d after a join cut off: voters %v, leader %q; want empty (waiting, no cluster of its own)", got, d.group.Leader())
	}
	// Asked again, it joins (nothing left to reset).
	if _, err := d.m.Join(ctx, "addr-warren@a", resetOf(d, false)); err != nil {
		t.Fatalf("join again after a cut-off join: %v", err)
	}
	if got := voters(t, d.group); !slices.Equal(got, []string{"warren@a", "warren@b", "warren@d"}) {
		t.Fatalf("d after joining again: voters %v", got)
	}

	peer, err := c.m.Join(ctx, "addr-warren@b", resetOf(c, false))
	if err != nil || peer != "warren@b" {
		t.Fatalf("join: %q %v", peer, err)
	}
	want := []string{"warren@a", "warren@b", "warren@c", "warren@d"}
	for _, mb := range []*member{a, b, c} {
		eventually.Succeeds(t, 10*time.Second, "three voters", func() error {
			if got := voters(t, mb.group); !slices.Equal(got, want) {
				return fmt.Errorf("%s sees %v", mb.name, got)
			}
			return nil
		})
	}
}
