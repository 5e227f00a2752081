package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// reconcilePVCs grows every node's PersistentVolumeClaim to
// spec.persistence.size (the API server refuses a smaller size). The
// StatefulSet's claim template cannot change after creation, so a claim
// created later from the old template is grown the same way on the next
// reconcile. The StorageClass must allow volume expansion; if it does not,
// the API server's refusal becomes the condition's message.
func (r *BrokerReconciler) reconcilePVCs(ctx context.Context, b *warrenv1.Broker, out *outcome) error {
	want := resource.PersistentVolumeClaimTemplate(b).Spec.Resources.Requests[corev1.ResourceStorage]
	sts, err := r.currentStatefulSet(ctx, b)
	if err != nil || sts == nil || sts.Spec.Replicas == nil {
		return err
	}
	for i := int32(0); i < *sts.Spec.Replicas; i++ {
		name := fmt.Sprintf("%s-%s-%d", resource.DataVolumeName, sts.Name, i)
		pvc := &corev1.PersistentVolumeClaim{}
		err := r.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: name}, pvc)
		if apierrors.IsNotFound(err) {
			continue // not created yet: the StatefulSet controller will
		}
		if err != nil {
			return out.fail(warrenv1.ReasonPVCExpandError, fmt.Errorf("get PersistentVolumeClaim %s: %w", name, err))
		}
		have := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if have.Cmp(want) >= 0 {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		if pvc.Spec.Resources.Requests == nil {
			pvc.Spec.Resources.Requests = corev1.ResourceList{}
		}
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
		if err := r.Patch(ctx, pvc, patch); err != nil {
			err = fmt.Errorf("expand PersistentVolumeClaim %s from %s to %s: %w", name, have.String(), want.String(), err)
			r.Recorder.Eventf(b, pvc, corev1.EventTypeWarning, warrenv1.ReasonPVCExpandError, "Expand", "%v", err)
			return out.fail(warrenv1.ReasonPVCExpandError, err)
		}
		r.Recorder.Eventf(b, pvc, corev1.EventTypeNormal, "PVCExpanded", "Expand", "expanded PersistentVolumeClaim %s from %s to %s", name, have.String(), want.String())
	}
	return nil
}
