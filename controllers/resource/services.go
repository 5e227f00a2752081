package resource

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// ServiceRoleLabel tells the headless Service (value "nodes") from the
// client Service (value "client"); the ServiceMonitor selects on it.
const ServiceRoleLabel = "warrenmq.io/service"

func clientPorts(b *warrenv1.Broker) []corev1.ServicePort {
	ports := []corev1.ServicePort{
		servicePort("amqp", PortAMQP),
		servicePort("stream", PortStream),
		servicePort("http", PortHTTP),
		servicePort("prometheus", PortPrometheus),
	}
	if b.Spec.TLS != nil {
		ports = append(ports, servicePort("amqps", PortAMQPS), servicePort("stream-tls", PortStreamTLS))
	}
	return ports
}

func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromString(name), Protocol: corev1.ProtocolTCP}
}

// HeadlessServiceBuilder builds the headless Service: a DNS name per pod
// (pod.<broker>-nodes.<namespace>.svc), published before the pods are
// ready so that starting nodes find each other.
type HeadlessServiceBuilder struct{ Broker *warrenv1.Broker }

// Build returns the empty Service.
func (s *HeadlessServiceBuilder) Build() (client.Object, error) {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: HeadlessServiceName(s.Broker), Namespace: s.Broker.Namespace}}, nil
}

// Update sets the selector and ports.
func (s *HeadlessServiceBuilder) Update(obj client.Object) error {
	svc := obj.(*corev1.Service)
	svc.Labels = mergeLabels(svc.Labels, Labels(s.Broker))
	svc.Labels[ServiceRoleLabel] = "nodes"
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	svc.Spec.PublishNotReadyAddresses = true
	svc.Spec.Selector = SelectorLabels(s.Broker)
	svc.Spec.Ports = append([]corev1.ServicePort{servicePort("cluster", PortCluster)}, clientPorts(s.Broker)...)
	return nil
}

// ClientServiceBuilder builds the Service clients connect to, of the type
// spec.service asks for, with spec.override.clientService applied last.
type ClientServiceBuilder struct{ Broker *warrenv1.Broker }

// Build returns the empty Service.
func (s *ClientServiceBuilder) Build() (client.Object, error) {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ClientServiceName(s.Broker), Namespace: s.Broker.Namespace}}, nil
}

// Update sets type, annotations, selector and ports, keeping node ports
// and cluster IPs the API server allocated.
func (s *ClientServiceBuilder) Update(obj client.Object) error {
	svc := obj.(*corev1.Service)
	svc.Labels = mergeLabels(svc.Labels, Labels(s.Broker))
	svc.Labels[ServiceRoleLabel] = "client"
	svc.Annotations = mergeLabels(svc.Annotations, s.Broker.Spec.Service.Annotations)
	typ := s.Broker.Spec.Service.Type
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	svc.Spec.Type = typ
	svc.Spec.Selector = SelectorLabels(s.Broker)
	ports := clientPorts(s.Broker)
	for i := range ports {
		for _, old := range svc.Spec.Ports {
			if old.Name == ports[i].Name && typ != corev1.ServiceTypeClusterIP {
				ports[i].NodePort = old.NodePort
			}
		}
	}
	svc.Spec.Ports = ports
	if o := s.Broker.Spec.Override.ClientService; o != nil && len(o.Raw) > 0 {
		return applyPatch(svc, o.Raw, "spec.override.clientService")
	}
	return nil
}

// applyPatch applies a strategic merge patch (the struct's patch strategy
// tags drive the merge) to obj in place.
func applyPatch[T any](obj *T, patch []byte, field string) error {
	orig, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	var zero T
	patched, err := strategicpatch.StrategicMergePatch(orig, patch, zero)
	if err != nil {
		return fmt.Errorf("%w: %s: not a valid patch: %v", ErrInvalidSpec, field, err)
	}
	var out T
	if err := json.Unmarshal(patched, &out); err != nil {
		return fmt.Errorf("%w: %s: patched object is invalid: %v", ErrInvalidSpec, field, err)
	}
	*obj = out
	return nil
}
