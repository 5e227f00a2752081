package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// Finalizer holds a deleted Broker until its StatefulSet is gone. Without
// it the garbage collector deletes every child at once, and nodes stopping
// gracefully (closing clients, handing over leadership) would lose their
// headless Service and Secrets midway. The other children are owned by the
// Broker and go with it once the finalizer is released. PersistentVolumeClaims
// are kept (retention policy Retain): delete them to drop the data.
const Finalizer = "warrenmq.io/finalizer"

func (r *BrokerReconciler) ensureFinalizer(ctx context.Context, b *warrenv1.Broker) (bool, error) {
	if controllerutil.ContainsFinalizer(b, Finalizer) {
		return false, nil
	}
	controllerutil.AddFinalizer(b, Finalizer)
	if err := r.Update(ctx, b); err != nil {
		return false, fmt.Errorf("add finalizer: %w", err)
	}
	return true, nil
}

func (r *BrokerReconciler) finalize(ctx context.Context, b *warrenv1.Broker) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		return ctrl.Result{}, nil
	}
	sts, err := r.currentStatefulSet(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if sts != nil {
		if sts.DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, sts, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete StatefulSet: %w", err)
			}
			r.Recorder.Eventf(b, sts, corev1.EventTypeNormal, "Deleting", "Delete", "deleting StatefulSet %s before the other children", sts.Name)
		}
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	controllerutil.RemoveFinalizer(b, Finalizer)
	if err := r.Update(ctx, b); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}
