package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

func (r *BrokerReconciler) paused(b *warrenv1.Broker) bool {
	return b.Annotations[warrenv1.PausedAnnotation] == "true"
}

// reportPaused records that the Broker is paused: its children are left as
// they are (a user may edit them by hand, for example while recovering a
// node) and only the status is updated. The event goes out once, when the
// pause begins.
func (r *BrokerReconciler) reportPaused(b *warrenv1.Broker, out *outcome) {
	msg := "the " + warrenv1.PausedAnnotation + " annotation is \"true\": the operator changes no child until it is removed"
	out.set(warrenv1.ReasonPaused, msg)
	c := meta.FindStatusCondition(b.Status.Conditions, warrenv1.ConditionReconcileSuccess)
	if c == nil || c.Reason != warrenv1.ReasonPaused {
		r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, warrenv1.ReasonPaused, "Pause", "%s", msg)
	}
}
