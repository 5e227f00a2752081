package resource

import (
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// ServiceMonitorBuilder builds the prometheus-operator ServiceMonitor that
// scrapes every node's /metrics through the headless Service (which lists
// every pod, ready or not).
type ServiceMonitorBuilder struct{ Broker *warrenv1.Broker }

// Build returns the empty ServiceMonitor.
func (m *ServiceMonitorBuilder) Build() (client.Object, error) {
	return &monitoringv1.ServiceMonitor{ObjectMeta: metav1.ObjectMeta{Name: ServiceMonitorName(m.Broker), Namespace: m.Broker.Namespace}}, nil
}

// Update sets the selector, the endpoint and the interval.
func (m *ServiceMonitorBuilder) Update(obj client.Object) error {
	sm := obj.(*monitoringv1.ServiceMonitor)
	spec := m.Broker.Spec.Monitoring.ServiceMonitor
	sm.Labels = mergeLabels(mergeLabels(sm.Labels, Labels(m.Broker)), spec.Labels)
	interval := spec.Interval
	if interval == "" {
		interval = "30s"
	}
	sel := SelectorLabels(m.Broker)
	sel[ServiceRoleLabel] = "nodes"
	sm.Spec.Selector = metav1.LabelSelector{MatchLabels: sel}
	sm.Spec.NamespaceSelector = monitoringv1.NamespaceSelector{MatchNames: []string{m.Broker.Namespace}}
	sm.Spec.Endpoints = []monitoringv1.Endpoint{{
		Port:     "prometheus",
		Path:     "/metrics",
		Interval: monitoringv1.Duration(interval),
	}}
	return nil
}
