package controllers

import (
	"context"
	"errors"
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// errChildConflict marks a child update that lost a race with another
// writer; the reconcile is retried quietly.
var errChildConflict = errors.New("child changed since it was read")

// reconcileChildren creates or updates every child with its builder, the
// Broker as controller owner (so deleting the Broker deletes them). An
// event tells each creation and change; a child the API server refuses
// sets ReconcileSuccess False with its error.
func (r *BrokerReconciler) reconcileChildren(ctx context.Context, b *warrenv1.Broker, replicas int32, out *outcome) error {
	tlsCA, err := r.checkTLSSecret(ctx, b)
	if err != nil {
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, warrenv1.ReasonTLSSecretInvalid, "Render", "%v", err)
		return out.fail(warrenv1.ReasonTLSSecretInvalid, err)
	}
	config, err := resource.BrokerConfig(b, tlsCA)
	if err != nil {
		out.set(warrenv1.ReasonInvalidSpec, err.Error())
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, warrenv1.ReasonInvalidSpec, "Render", "%v", err)
		return nil
	}
	smInstalled, err := r.serviceMonitorInstalled()
	if err != nil {
		return out.fail(warrenv1.ReasonChildError, err)
	}
	smEnabled := b.Spec.Monitoring.ServiceMonitor.Enabled == nil || *b.Spec.Monitoring.ServiceMonitor.Enabled
	builders := resource.Builders(b, resource.Options{
		DefaultImage:   r.DefaultImage,
		Replicas:       replicas,
		ConfigHash:     resource.ConfigHash(config),
		ServiceMonitor: smInstalled && smEnabled,
		TLSCA:          tlsCA,
	})
	for _, bld := range builders {
		obj, err := bld.Build()
		if err != nil {
			return out.fail(warrenv1.ReasonChildError, err)
		}
		kind := r.kindOf(obj)
		var before string
		op, err := controllerutil.CreateOrUpdate(ctx, r.Client, obj, func() error {
			before = obj.GetResourceVersion()
			if err := bld.Update(obj); err != nil {
				return err
			}
			return controllerutil.SetControllerReference(b, obj, r.Scheme())
		})
		if err != nil {
			err = fmt.Errorf("%s %s: %w", kind, obj.GetName(), err)
			if apierrors.IsConflict(err) {
				// The child changed since the cache saw it (the StatefulSet
				// controller writes its status): not a failure, read it again.
				return fmt.Errorf("%w: %w", errChildConflict, err)
			}
			if apierrors.IsInvalid(err) || errors.Is(err, resource.ErrInvalidSpec) {
				out.set(warrenv1.ReasonInvalidSpec, err.Error())
				r.Recorder.Eventf(b, obj, corev1.EventTypeWarning, warrenv1.ReasonInvalidSpec, "Apply", "%v", err)
				return nil
			}
			r.Recorder.Eventf(b, obj, corev1.EventTypeWarning, warrenv1.ReasonChildError, "Apply", "%v", err)
			return out.fail(warrenv1.ReasonChildError, err)
		}
		if svc, ok := obj.(*corev1.Service); ok && svc.Name == resource.HeadlessServiceName(b) {
			// The Service comes before the StatefulSet: the API server has
			// set its IP families, which are the pods'.
			for _, other := range builders {
				if sb, ok := other.(*resource.StatefulSetBuilder); ok {
					sb.PodIPv6 = resource.PrimaryIPv6(svc)
				}
			}
		}
		switch op {
		case controllerutil.OperationResultCreated:
			r.Recorder.Eventf(b, obj, corev1.EventTypeNormal, "Created", "Create", "created %s %s", kind, obj.GetName())
		case controllerutil.OperationResultUpdated:
			if obj.GetResourceVersion() == before {
				continue // only fields the API server defaults differed: nothing changed
			}
			r.Recorder.Eventf(b, obj, corev1.EventTypeNormal, "Updated", "Update", "updated %s %s", kind, obj.GetName())
		}
	}
	if smInstalled && !smEnabled {
		return r.deleteServiceMonitor(ctx, b, out)
	}
	return nil
}

// serviceMonitorInstalled reports whether the prometheus-operator CRD is
// served. The REST mapper asks the API server again for an unknown group,
// so a CRD installed after the operator started is found.
func (r *BrokerReconciler) serviceMonitorInstalled() (bool, error) {
	_, err := r.RESTMapper().RESTMapping(schema.GroupKind{Group: monitoringv1.SchemeGroupVersion.Group, Kind: monitoringv1.ServiceMonitorsKind}, monitoringv1.SchemeGroupVersion.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	default:
		return false, fmt.Errorf("look up the ServiceMonitor CRD: %w", err)
	}
}

func (r *BrokerReconciler) deleteServiceMonitor(ctx context.Context, b *warrenv1.Broker, out *outcome) error {
	sm := &monitoringv1.ServiceMonitor{}
	err := r.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: resource.ServiceMonitorName(b)}, sm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return out.fail(warrenv1.ReasonChildError, fmt.Errorf("get ServiceMonitor: %w", err))
	}
	if !metav1IsControlledBy(sm, b) {
		return nil
	}
	if err := r.Delete(ctx, sm); client.IgnoreNotFound(err) != nil {
		return out.fail(warrenv1.ReasonChildError, fmt.Errorf("delete ServiceMonitor: %w", err))
	}
	r.Recorder.Eventf(b, sm, corev1.EventTypeNormal, "Deleted", "Delete", "deleted ServiceMonitor %s (monitoring.serviceMonitor.enabled is false)", sm.Name)
	return nil
}

func (r *BrokerReconciler) currentStatefulSet(ctx context.Context, b *warrenv1.Broker) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	err := r.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: resource.StatefulSetName(b)}, sts)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get StatefulSet: %w", err)
	}
	return sts, nil
}

func (r *BrokerReconciler) kindOf(obj client.Object) string {
	gvk, err := apiutil.GVKForObject(obj, r.Scheme())
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}

func metav1IsControlledBy(obj client.Object, b *warrenv1.Broker) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.UID == b.UID {
			return true
		}
	}
	return false
}
