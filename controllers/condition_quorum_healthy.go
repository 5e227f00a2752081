package controllers

import (
	"fmt"
	"strings"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// Reasons of ConditionQuorumHealthy.
const (
	reasonAllMembersVoting = "AllMembersVoting"
	reasonNodesNotRunning  = "MembersNotRunning"
	reasonNodesNotMembers  = "NodesNotMembers"
	reasonNodesJoining     = "MembersJoining"
	reasonStaleMembers     = "StaleMembers"
)

// quorumHealthy is ConditionQuorumHealthy from the cluster's own state:
// True when the node of every pod the StatefulSet expects is a running
// voter of the metadata group and no other voter is down, so any one node
// may stop (a restart, a drain) without a group losing its majority: no
// member is quorum critical. Otherwise the message names each node that
// is missing, joining, down or left over, with what to do.
func quorumHealthy(b *warrenv1.Broker, expected int32, v clusterView) (bool, string, string) {
	if v.err != nil {
		return false, reasonClusterStatusError, fmt.Sprintf("the cluster's state is unknown: %v", v.err)
	}
	st := v.status
	podOf := map[string]string{}
	var notMember, joining, down, stale []string
	for i := range expected {
		name := resource.NodeName(b, i)
		podOf[name] = resource.PodName(b, i)
		n, ok := st.Member(name)
		switch {
		case !ok:
			notMember = append(notMember, fmt.Sprintf("%s (pod %s)", name, podOf[name]))
		case !n.Running:
			down = append(down, fmt.Sprintf("%s (pod %s)", name, podOf[name]))
		case !n.Voter:
			joining = append(joining, fmt.Sprintf("%s (pod %s)", name, podOf[name]))
		}
	}
	voters, running := 0, 0
	for _, n := range st.Nodes {
		if n.Voter {
			voters++
			if n.Running {
				running++
			}
		}
		if _, ok := podOf[n.Name]; !ok && !n.Running {
			stale = append(stale, n.Name)
		}
	}
	critical := ""
	if voters > 1 && running <= voters/2+1 && running < voters {
		critical = fmt.Sprintf("; %d of %d voters run, so stopping one more node would lose the metadata majority", running, voters)
	}
	switch {
	case len(down) > 0:
		return false, reasonNodesNotRunning, fmt.Sprintf("members not answering: %s; check these pods and their logs%s",
			strings.Join(down, ", "), critical)
	case len(notMember) > 0:
		return false, reasonNodesNotMembers, fmt.Sprintf("not members of the cluster: %s; a starting pod joins through %s, check its log if it stays out%s",
			strings.Join(notMember, ", "), resource.PodName(b, 0), critical)
	case len(joining) > 0:
		return false, reasonNodesJoining, fmt.Sprintf("joining, not voting yet: %s%s", strings.Join(joining, ", "), critical)
	case len(stale) > 0:
		return false, reasonStaleMembers, fmt.Sprintf("members that no pod runs any more: %s; they count against the majority: remove each with `warren ctl forget-node NAME` on any pod%s",
			strings.Join(stale, ", "), critical)
	}
	if expected == 1 {
		return true, reasonAllMembersVoting, "the single node is a running member (it has no replica to fail over to)"
	}
	return true, reasonAllMembersVoting, fmt.Sprintf("all %d nodes are running voting members; any one may stop without losing the metadata majority", expected)
}
