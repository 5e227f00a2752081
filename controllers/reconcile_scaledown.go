package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// leaveWait bounds how long one reconcile waits for a decommissioned node
// to be gone from the cluster's membership as the other nodes see it.
const leaveWait = 30 * time.Second

// scaleDown returns the replica count the StatefulSet gets. A spec.replicas
// below the StatefulSet's count shrinks the cluster one node at a time,
// highest ordinal first (the pod the StatefulSet removes): the node is
// decommissioned through its own API (its leaderships and memberships move
// to the other nodes, then it leaves the cluster), the operator waits until
// the other nodes no longer list it as a member, and only then does the
// StatefulSet shrink by one; once its pod is gone (the StatefulSet's status
// says so), the next reconcile takes the next node. A node
// that is no member (it never joined, or has left) is removed at once.
// Events say each step; while nodes remain to go ReconcileSuccess is False
// with reason ScalingDown. A failed decommission stops the scale-down with
// the StatefulSet as it is (ReconcileSuccess False, DecommissionFailed,
// saying why and what to do); it is tried again at the next resync.
func (r *BrokerReconciler) scaleDown(ctx context.Context, b *warrenv1.Broker, sts *appsv1.StatefulSet, out *outcome) (int32, ctrl.Result) {
	want := resource.Replicas(b)
	if sts == nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas <= want {
		return want, ctrl.Result{}
	}
	have := *sts.Spec.Replicas
	last := have - 1
	if sts.Status.ObservedGeneration < sts.Generation || sts.Status.Replicas > have {
		// The previous step's pod is still terminating: one node at a time.
		out.set(warrenv1.ReasonScalingDown, fmt.Sprintf("scaling down from %d to %d nodes: waiting for pod %s to terminate before the next node is decommissioned",
			have, want, resource.PodName(b, have)))
		return have, ctrl.Result{RequeueAfter: 2 * time.Second}
	}
	podName, node := resource.PodName(b, last), resource.NodeName(b, last)
	view := r.observeCluster(ctx, b, podName)
	if view.err != nil {
		msg := fmt.Sprintf("scaling down from %d to %d nodes waits: the cluster's state is unknown (%v), so node %s cannot be decommissioned safely", have, want, view.err, node)
		out.set(warrenv1.ReasonScalingDown, msg)
		r.Recorder.Eventf(b, sts, corev1.EventTypeWarning, warrenv1.ReasonScalingDown, "ScaleDown", "%s", msg)
		return have, ctrl.Result{RequeueAfter: notReadyRetry}
	}
	if _, member := view.status.Member(node); member {
		if !r.decommission(ctx, b, sts, podName, node, have, want, out) {
			return have, ctrl.Result{}
		}
		if !r.waitLeft(ctx, b, podName, node) {
			msg := fmt.Sprintf("scaling down from %d to %d nodes: node %s (pod %s) was decommissioned but the other nodes still list it as a member; waiting", have, want, node, podName)
			out.set(warrenv1.ReasonScalingDown, msg)
			return have, ctrl.Result{RequeueAfter: 2 * time.Second}
		}
		r.Recorder.Eventf(b, sts, corev1.EventTypeNormal, "Decommissioned", "ScaleDown", "node %s (pod %s) left the cluster", node, podName)
	}
	r.Recorder.Eventf(b, sts, corev1.EventTypeNormal, "ScaledDown", "ScaleDown",
		"StatefulSet %s scaled from %d to %d nodes (node %s is no member of the cluster)", sts.Name, have, last, node)
	if last > want {
		out.set(warrenv1.ReasonScalingDown, fmt.Sprintf("scaling down from %d to %d nodes, one decommissioned node at a time: %d to go", have, want, last-want))
	}
	return last, ctrl.Result{}
}

// decommission asks node (pod podName) to decommission itself and says
// whether it did; a failure is recorded in out and as a Warning event.
func (r *BrokerReconciler) decommission(ctx context.Context, b *warrenv1.Broker, sts *appsv1.StatefulSet, podName, node string, have, want int32, out *outcome) bool {
	fail := func(why string) bool {
		msg := fmt.Sprintf("scaling down from %d to %d nodes stopped: %s; the StatefulSet keeps %d nodes. Fix the cause and the operator tries again, or set spec.replicas back to %d",
			have, want, why, have, have)
		out.set(warrenv1.ReasonDecommissionFailed, msg)
		r.Recorder.Eventf(b, sts, corev1.EventTypeWarning, warrenv1.ReasonDecommissionFailed, "ScaleDown", "%s", msg)
		return false
	}
	pod := &corev1.Pod{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: podName}, pod); err != nil {
		return fail(fmt.Sprintf("node %s is a member but its pod %s cannot be read (%v): a node can only be decommissioned while it runs; if it is gone for good, remove it with `warren ctl forget-node %s` on another pod", node, podName, err, node))
	}
	if pod.Status.Phase != corev1.PodRunning {
		return fail(fmt.Sprintf("node %s is a member but its pod %s is %s: a node can only be decommissioned while it runs", node, podName, pod.Status.Phase))
	}
	user, pass, err := r.defaultUser(ctx, b)
	if err != nil {
		return fail(err.Error())
	}
	r.Recorder.Eventf(b, sts, corev1.EventTypeNormal, "Decommissioning", "ScaleDown",
		"decommissioning node %s (pod %s): its leaderships and memberships move to the other nodes, then it leaves the cluster and the StatefulSet shrinks from %d to %d",
		node, podName, have, have-1)
	if err := r.nodeAPI(b, pod, user, pass).Decommission(ctx); err != nil {
		return fail(fmt.Sprintf("decommissioning node %s (pod %s) failed: %v", node, podName, err))
	}
	return true
}

// waitLeft waits, up to leaveWait, until the cluster as another node sees
// it no longer lists node.
func (r *BrokerReconciler) waitLeft(ctx context.Context, b *warrenv1.Broker, podName, node string) bool {
	ctx, cancel := context.WithTimeout(ctx, leaveWait)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		v := r.observeCluster(ctx, b, podName)
		if v.err == nil && v.pod != podName {
			if _, member := v.status.Member(node); !member {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}
