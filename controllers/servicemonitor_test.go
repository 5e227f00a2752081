package controllers

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// Without prometheus-operator's CRD the Broker reconciles fine and no
// ServiceMonitor is attempted; once the CRD is installed (while the operator
// runs) the ServiceMonitor appears; disabling it removes it.
func TestServiceMonitorWithAndWithoutCRD(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "metrics", func(b *warrenv1.Broker) {
		b.Spec.Monitoring.ServiceMonitor.Labels = map[string]string{"release": "prometheus"}
	})
	createBroker(t, b)
	statefulSetOf(t, b)
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)
	sm := &monitoringv1.ServiceMonitor{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metrics"}}
	if err := getObj(sm); err == nil {
		t.Fatal("a ServiceMonitor exists before its CRD")
	}

	if _, err := envtest.InstallCRDs(testConfig, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("testdata", "crds", "monitoring.coreos.com_servicemonitors.yaml")}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("install the ServiceMonitor CRD: %v", err)
	}
	// Any change to the Broker triggers a reconcile; the operator finds the
	// new CRD by itself.
	updateBroker(t, b, func(b *warrenv1.Broker) { b.Spec.Monitoring.ServiceMonitor.Interval = "15s" })
	eventually(t, 30*time.Second, "ServiceMonitor", func() error {
		if err := getObj(sm); err != nil {
			return err
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "prometheus" || sm.Spec.Endpoints[0].Interval != "15s" {
			return fmt.Errorf("endpoints %+v", sm.Spec.Endpoints)
		}
		return nil
	})
	if sm.Labels["release"] != "prometheus" || sm.Spec.Selector.MatchLabels["warrenmq.io/service"] != "nodes" || !metav1IsControlledBy(sm, b) {
		t.Errorf("ServiceMonitor labels %v selector %v owners %v", sm.Labels, sm.Spec.Selector, sm.OwnerReferences)
	}
	eventFor(t, b, "Created", "ServiceMonitor metrics")

	updateBroker(t, b, func(b *warrenv1.Broker) { b.Spec.Monitoring.ServiceMonitor.Enabled = ptr.To(false) })
	eventually(t, 20*time.Second, "ServiceMonitor deleted", func() error {
		if err := getObj(sm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}
