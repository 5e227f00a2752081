//go:build faults && linux

package faults

import (
	"strconv"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// TestClusterFormsWithEveryMember: three nodes started at once form one
// cluster: every node starts, names the same leader, and sees three
// running voters (a join racing the first node's start once left a voter
// without an address: it never started).
func TestClusterFormsWithEveryMember(t *testing.T) {
	for i := range 3 {
		t.Run(strconv.Itoa(i+1), func(t *testing.T) { formsWithEveryMember(t) })
	}
}

func formsWithEveryMember(t *testing.T) {
	{
		c := startCluster(t, 3)
		c.WaitLeaders(c.MetadataLeaderProbe)
		for _, n := range c.Nodes {
			eventually.Succeeds(t, 10*time.Second, n.Name+" sees three running voters", func() error {
				st, err := c.Status(n)
				if err != nil {
					return err
				}
				running := 0
				for _, m := range st.Nodes {
					if m.Voter && m.Running {
						running++
					}
				}
				if running != 3 {
					return errorf("%s sees %+v", n.Name, st.Nodes)
				}
				return nil
			})
		}
		if c.LogContains(c.Nodes[0], "forgetting a name that is not a member") {
			t.Errorf("n1 forgot a member's name while the cluster formed")
		}
	}
}
