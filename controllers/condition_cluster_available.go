package controllers

import (
	"fmt"
	"strings"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// Reasons of ConditionClusterAvailable.
const (
	reasonClusterAvailable   = "MetadataLeaderElected"
	reasonNoMetadataLeader   = "NoMetadataLeader"
	reasonMajorityUnreached  = "MajorityUnreachable"
	reasonClusterStatusError = "ClusterStatusUnavailable"
)

// clusterAvailable is ConditionClusterAvailable from the cluster's own
// state: True when the metadata group has a leader and a majority of its
// voters answer, as a ready node sees it (GET /api/cluster/status). Then
// clients are served and definitions can change; pod readiness alone
// cannot tell (three ready pods that never formed one cluster are not
// available).
func clusterAvailable(b *warrenv1.Broker, v clusterView) (bool, string, string) {
	if v.err != nil {
		return false, reasonClusterStatusError, fmt.Sprintf(
			"no ready node answered GET /api/cluster/status (%v); check the pods (kubectl get pods -l app.kubernetes.io/instance=%s) and their logs",
			v.err, b.Name)
	}
	st := v.status
	voters, running := 0, []string{}
	for _, n := range st.Nodes {
		if !n.Voter {
			continue
		}
		voters++
		if n.Running {
			running = append(running, n.Name)
		}
	}
	majority := voters/2 + 1
	if st.MetadataLeader == "" {
		return false, reasonNoMetadataLeader, fmt.Sprintf(
			"node %s (pod %s) sees no metadata leader: %d of %d members answer, %d needed (%s); clients cannot declare or change anything until a majority runs and reaches the others on port %d",
			st.Node, v.pod, len(running), voters, majority, strings.Join(running, ", "), resource.PortCluster)
	}
	if len(running) < majority {
		return false, reasonMajorityUnreached, fmt.Sprintf(
			"node %s (pod %s) reaches %d of %d members, %d needed for a majority (running: %s); the metadata leader %s is about to step down",
			st.Node, v.pod, len(running), voters, majority, strings.Join(running, ", "), st.MetadataLeader)
	}
	return true, reasonClusterAvailable, fmt.Sprintf("metadata leader %s; %d of %d members answer (seen from pod %s)",
		st.MetadataLeader, len(running), voters, v.pod)
}
