package controllers

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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

	installServiceMonitorCRD(t)
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

	// With the CRD installed, the ServiceMonitors users install for the
	// operator itself validate too (kustomize config/prometheus, the chart's
	// serviceMonitor.enabled).
	t.Run("operator ServiceMonitor manifests", func(t *testing.T) {
		kc := kubeconfig(t)
		ensureNamespace(t, "warren-system")
		report := dryRunApply(t, kc, run(t, nil, kubectl(), "kustomize", "config/prometheus"))
		if !strings.Contains(report, "servicemonitor.monitoring.coreos.com/warren-operator serverside-applied") {
			t.Errorf("config/prometheus: %s", report)
		}
		ensureNamespace(t, "operators")
		rendered := run(t, nil, helmBinary(t), "template", "wo", filepath.Join(repoRoot, "charts", "warren-operator"),
			"--namespace", "operators", "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prometheus")
		report = dryRunApply(t, kc, rendered)
		if !strings.Contains(report, "servicemonitor.monitoring.coreos.com/wo-warren-operator serverside-applied") {
			t.Errorf("chart with serviceMonitor.enabled: %s", report)
		}
	})
}
