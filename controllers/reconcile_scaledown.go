package controllers

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// guardScaleDown returns the replica count the StatefulSet gets. A
// spec.replicas below the StatefulSet's current count is refused: removing
// a node before its Raft memberships have moved elsewhere could lose a
// quorum queue's majority, and the broker cannot decommission a node yet.
// The refusal is a condition (ReconcileSuccess False, ScaleDownRefused) and
// a Warning event; every other change of the spec is still applied.
func (r *BrokerReconciler) guardScaleDown(b *warrenv1.Broker, sts *appsv1.StatefulSet, out *outcome) int32 {
	want := resource.Replicas(b)
	if sts == nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas <= want {
		return want
	}
	have := *sts.Spec.Replicas
	msg := fmt.Sprintf("spec.replicas is %d but the cluster runs %d nodes: scaling down is refused because a node cannot yet be decommissioned safely (its quorum queue and stream replicas would be lost); set spec.replicas back to %d", want, have, have)
	out.set(warrenv1.ReasonScaleDownRefused, msg)
	r.Recorder.Eventf(b, sts, corev1.EventTypeWarning, warrenv1.ReasonScaleDownRefused, "Scale", "%s", msg)
	return have
}
