package brokerapi

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
)

// The cluster calls against a real three-node cluster: the status the
// operator's conditions come from, and a decommission as a scale-down
// makes it.
func TestClusterCallsAgainstCluster(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	ctx := context.Background()
	api := func(i int) *Client {
		return &Client{BaseURL: c.Nodes[i].HTTPURL(), Username: "guest", Password: "guest"}
	}
	st, err := api(0).ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Node != "warren@n1" || st.MetadataLeader == "" || len(st.Nodes) != 3 {
		t.Fatalf("status %+v", st)
	}
	for _, name := range []string{"warren@n1", "warren@n2", "warren@n3"} {
		if n, ok := st.Member(name); !ok || !n.Voter || !n.Running {
			t.Errorf("member %s: %+v, %v", name, n, ok)
		}
	}

	if err := api(2).Decommission(ctx); err != nil {
		t.Fatalf("Decommission: %v", err)
	}
	st, err = api(0).ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Member("warren@n3"); ok || len(st.Nodes) != 2 {
		t.Errorf("after decommission of n3: %+v", st.Nodes)
	}

	// A node that is alone cannot be decommissioned: the answer says why.
	alone := brokertest.Start(t)
	err = (&Client{BaseURL: alone.HTTPURL(), Username: "guest", Password: "guest"}).Decommission(ctx)
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "only member") {
		t.Errorf("decommission of a single node: %v", err)
	}
}
