package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	res "github.com/warrenmq/warren/controllers/resource"
)

// conditionMessage waits for the condition and returns its message.
func conditionMessage(t *testing.T, b *warrenv1.Broker, typ string, status metav1.ConditionStatus, reason string) string {
	t.Helper()
	condition(t, b, typ, status, reason)
	got := &warrenv1.Broker{}
	if err := testClient.Get(context.Background(), clientKey(b), got); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(got.Status.Conditions, typ).Message
}

// ClusterAvailable and QuorumHealthy come from the cluster's own status:
// with every pod ready, a node whose process stopped makes QuorumHealthy
// False (naming it), and a cluster without a majority is not available.
func TestClusterConditionsFromClusterStatus(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "health")
	createBroker(t, b)
	nodes := startWarrenCluster(t, b, 3)
	createPods(t, b, true, true, true)
	setReady(t, b, 3)

	msg := conditionMessage(t, b, warrenv1.ConditionClusterAvailable, metav1.ConditionTrue, "MetadataLeaderElected")
	if !strings.Contains(msg, "3 of 3 members answer") {
		t.Errorf("ClusterAvailable message %q", msg)
	}
	condition(t, b, warrenv1.ConditionQuorumHealthy, metav1.ConditionTrue, "AllMembersVoting")
	condition(t, b, warrenv1.ConditionReady, metav1.ConditionTrue, "Ready")

	// Node 2 stops; Kubernetes still calls its pod ready.
	nodes[2].stop()
	msg = conditionMessage(t, b, warrenv1.ConditionQuorumHealthy, metav1.ConditionFalse, "MembersNotRunning")
	for _, want := range []string{res.NodeName(b, 2), "pod health-server-2", "stopping one more node would lose the metadata majority"} {
		if !strings.Contains(msg, want) {
			t.Errorf("QuorumHealthy message %q lacks %q", msg, want)
		}
	}
	condition(t, b, warrenv1.ConditionClusterAvailable, metav1.ConditionTrue, "MetadataLeaderElected")
	condition(t, b, warrenv1.ConditionAllReplicasReady, metav1.ConditionTrue, "AllPodsReady")
	eventFor(t, b, "MembersNotRunning", "QuorumHealthy is False: members not answering: "+res.NodeName(b, 2))

	// Node 1 stops too: one of three members is no majority.
	nodes[1].stop()
	msg = conditionMessage(t, b, warrenv1.ConditionClusterAvailable, metav1.ConditionFalse, "")
	if !strings.Contains(msg, "1 of 3 members answer") && !strings.Contains(msg, "reaches 1 of 3 members") {
		t.Errorf("ClusterAvailable message %q does not say how many answer", msg)
	}
	condition(t, b, warrenv1.ConditionReady, metav1.ConditionFalse, "NotReady")
}

// Scale-down decommissions the highest-ordinal node, waits until it has
// left the cluster, shrinks the StatefulSet by one, and repeats.
func TestScaleDownDecommissionsOneNodeAtATime(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "shrink")
	createBroker(t, b)
	nodes := startWarrenCluster(t, b, 3)
	createPods(t, b, true, true, true)
	setReady(t, b, 3)
	condition(t, b, warrenv1.ConditionQuorumHealthy, metav1.ConditionTrue, "AllMembersVoting")
	sts := statefulSetOf(t, b)
	// A removed pod's data goes with it (its node left the cluster); the
	// Broker's deletion keeps every PVC.
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenScaled != appsv1.DeletePersistentVolumeClaimRetentionPolicyType ||
		p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("PVC retention policy %+v", p)
	}

	updateBroker(t, b, func(b *warrenv1.Broker) { b.Spec.Replicas = ptr.To[int32](1) })
	for _, step := range []struct{ from, to int32 }{{3, 2}, {2, 1}} {
		eventually(t, 60*time.Second, fmt.Sprintf("StatefulSet scaled to %d", step.to), func() error {
			if err := getObj(sts); err != nil {
				return err
			}
			if *sts.Spec.Replicas != step.to {
				return fmt.Errorf("replicas %d", *sts.Spec.Replicas)
			}
			return nil
		})
		// Before the StatefulSet shrank, the node had left the cluster.
		gone := nodes[step.to]
		st, err := nodes[0].api().ClusterStatus(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, member := st.Member(gone.node); member || len(st.Nodes) != int(step.to) {
			t.Fatalf("StatefulSet at %d while the cluster has members %+v", step.to, st.Nodes)
		}
		eventFor(t, b, "Decommissioning", "decommissioning node "+gone.node)
		eventFor(t, b, "ScaledDown", fmt.Sprintf("scaled from %d to %d nodes", step.from, step.to))
		// Play the StatefulSet controller: the pod goes, its node stops.
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = ns, gone.pod
		if err := testClient.Delete(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		gone.stop()
		setReady(t, b, step.to)
	}
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)
	condition(t, b, warrenv1.ConditionQuorumHealthy, metav1.ConditionTrue, "AllMembersVoting")
	condition(t, b, warrenv1.ConditionClusterAvailable, metav1.ConditionTrue, "MetadataLeaderElected")
}

// A node that cannot be decommissioned (its process is down) stops the
// scale-down with a condition saying why; the StatefulSet keeps its nodes.
// Growing just grows the StatefulSet.
func TestScaleDownStopsWhenDecommissionFails(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "stuck")
	createBroker(t, b)
	nodes := startWarrenCluster(t, b, 3)
	createPods(t, b, true, true, true)
	setReady(t, b, 3)
	condition(t, b, warrenv1.ConditionQuorumHealthy, metav1.ConditionTrue, "AllMembersVoting")
	sts := statefulSetOf(t, b)

	nodes[2].stop() // a member whose process is down (crash-looping pod)
	updateBroker(t, b, func(b *warrenv1.Broker) { b.Spec.Replicas = ptr.To[int32](1) })
	msg := conditionMessage(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionFalse, warrenv1.ReasonDecommissionFailed)
	for _, want := range []string{"decommissioning node " + nodes[2].node, "connection refused", "the StatefulSet keeps 3 nodes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ReconcileSuccess message %q lacks %q", msg, want)
		}
	}
	eventFor(t, b, warrenv1.ReasonDecommissionFailed, "set spec.replicas back to 3")
	consistently(t, 2*time.Second, "StatefulSet keeps 3 replicas", func() error {
		if err := getObj(sts); err != nil {
			return err
		}
		if *sts.Spec.Replicas != 3 {
			return fmt.Errorf("StatefulSet scaled to %d", *sts.Spec.Replicas)
		}
		return nil
	})

	updateBroker(t, b, func(b *warrenv1.Broker) { b.Spec.Replicas = ptr.To[int32](5) })
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)
	eventually(t, 10*time.Second, "scaled up to 5", func() error {
		if err := getObj(sts); err != nil {
			return err
		}
		if *sts.Spec.Replicas != 5 {
			return fmt.Errorf("replicas %d", *sts.Spec.Replicas)
		}
		return nil
	})
}
