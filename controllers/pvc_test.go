package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// Growing spec.persistence.size expands the nodes' PVCs (the StorageClass
// allows expansion; the PVCs are bound, as the kubelet and a provisioner
// would leave them).
func TestPersistenceGrowthExpandsPVCs(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "expandable-"}, Provisioner: "example.com/test", AllowVolumeExpansion: ptr.To(true)}
	if err := testClient.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	b := newBroker(ns, "grow", func(b *warrenv1.Broker) {
		b.Spec.Replicas = ptr.To[int32](1)
		b.Spec.Persistence.StorageClassName = ptr.To(sc.Name)
		b.Spec.Persistence.Size = resource.MustParse("1Gi")
	})
	createBroker(t, b)
	sts := statefulSetOf(t, b)

	// Play the StatefulSet controller and the provisioner: the claim of pod 0, bound.
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-" + sts.Name + "-0", Labels: sts.Spec.VolumeClaimTemplates[0].Labels},
		Spec:       sts.Spec.VolumeClaimTemplates[0].Spec,
	}
	if err := testClient.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	if err := testClient.Status().Update(ctx, pvc); err != nil {
		t.Fatal(err)
	}

	updateBroker(t, b, func(b *warrenv1.Broker) { b.Spec.Persistence.Size = resource.MustParse("3Gi") })
	eventually(t, 20*time.Second, "PVC expanded", func() error {
		if err := getObj(pvc); err != nil {
			return err
		}
		if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "3Gi" {
			return fmt.Errorf("request %s", got.String())
		}
		return nil
	})
	eventFor(t, b, "PVCExpanded", "from 1Gi to 3Gi")
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)
}
