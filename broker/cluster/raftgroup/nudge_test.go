package raftgroup

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// With a CommitTimeout far longer than the test, the followers still
// apply every command soon after Apply returns on the leader, under
// concurrent Applies too: a commit is never left untold (the leader's
// nudge, a barrier appended after the commit, carries it), including the
// commits that happen while an earlier barrier is under way.
func TestFollowersApplySoonAfterEveryCommit(t *testing.T) {
	// Elections slow enough that the leader stays put under -race.
	timing := Timing{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second,
		LeaderLeaseTimeout: time.Second, CommitTimeout: time.Minute}
	hub := transport.NewInmemHub()
	var groups []*Group
	for i := 1; i <= 3; i++ {
		g, err := Open(Config{ID: "g", Node: "n" + strconv.Itoa(i), Network: hub.Network("n" + strconv.Itoa(i)),
			Stores: logstore.NewInmem(), SnapshotDir: t.TempDir(), FSM: &listFSM{}, Timing: timing, Bootstrap: i == 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		groups = append(groups, g)
	}
	leader := groups[0]
	waitLeader(t, leader)
	for _, g := range groups[1:] {
		if err := leader.AddVoter(ctxT(t), g.Node()); err != nil {
			t.Fatal(err)
		}
	}
	const writers, rounds = 8, 30
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				_, index, err := leader.Apply(ctxT(t), []byte(strconv.Itoa(w*rounds+r)))
				if err != nil {
					t.Error(err)
					return
				}
				for _, g := range groups[1:] {
					if !eventually.Within(5*time.Second, func() bool { return g.AppliedIndex() >= index }) {
						t.Errorf("%s applies entry %d: not within 5s (the commit timeout is a minute)", g.Node(), index)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
