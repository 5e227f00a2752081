package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// checkTLSSecret reads the Secret of spec.tls (from the API server: Secrets
// are not cached) and reports whether it has a ca.crt. A missing Secret,
// or one without tls.crt or tls.key, is an error the user must fix: the
// pods would not start with it (the kubelet cannot mount it, or the broker
// refuses its config). The reconcile is retried with backoff, so a Secret
// created later (by cert-manager, say) is picked up.
func (r *BrokerReconciler) checkTLSSecret(ctx context.Context, b *warrenv1.Broker) (bool, error) {
	if b.Spec.TLS == nil {
		return false, nil
	}
	name := b.Spec.TLS.SecretName
	sec := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: name}, sec)
	if apierrors.IsNotFound(err) {
		return false, fmt.Errorf("spec.tls.secretName: Secret %s/%s not found", b.Namespace, name)
	}
	if err != nil {
		return false, fmt.Errorf("spec.tls.secretName: get Secret %s/%s: %w", b.Namespace, name, err)
	}
	for _, k := range []string{resource.KeyTLSCert, resource.KeyTLSKey} {
		if len(sec.Data[k]) == 0 {
			return false, fmt.Errorf("spec.tls.secretName: Secret %s/%s has no %s", b.Namespace, name, k)
		}
	}
	return len(sec.Data[resource.KeyTLSCA]) > 0, nil
}
