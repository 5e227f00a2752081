package resource

import (
	"fmt"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// Well-known ports of a Warren node (DESIGN.md).
const (
	PortAMQP       = 5672
	PortAMQPS      = 5671
	PortStream     = 5552
	PortStreamTLS  = 5551
	PortHTTP       = 15672
	PortPrometheus = 15692
	PortCluster    = 25672
)

// Paths inside the broker container.
const (
	ConfigDir  = "/etc/warren"
	ConfigFile = "warren.yaml"
	DataDir    = "/var/lib/warren"
	// TLSDir is where spec.tls.secretName is mounted.
	TLSDir = "/etc/warren/tls"
)

// Keys of the spec.tls Secret (kubernetes.io/tls, plus the CA as
// cert-manager writes it).
const (
	KeyTLSCert = "tls.crt"
	KeyTLSKey  = "tls.key"
	KeyTLSCA   = "ca.crt"
)

// TLSVolumeName is the pod volume of the spec.tls Secret.
const TLSVolumeName = "tls"

// ConfigHashAnnotation on the pod template is the hash of the broker config
// file: a change to the file changes the template and rolls the pods; a
// change that needs no restart (vhost policies) does not touch it.
const ConfigHashAnnotation = "warrenmq.io/config-hash"

// Keys of the default-user Secret.
const (
	KeyUsername = "username"
	KeyPassword = "password"
	KeyHost     = "host"
	KeyPort     = "port"
	KeyURI      = "uri"
	KeyToken    = "token"
)

// ClientServiceName is the Service clients connect to.
func ClientServiceName(b *warrenv1.Broker) string { return b.Name }

// HeadlessServiceName is the Service that gives each pod a DNS name and
// through which nodes find each other.
func HeadlessServiceName(b *warrenv1.Broker) string { return b.Name + "-nodes" }

// StatefulSetName is the StatefulSet of broker nodes.
func StatefulSetName(b *warrenv1.Broker) string { return b.Name + "-server" }

// ConfigMapName holds the broker config file.
func ConfigMapName(b *warrenv1.Broker) string { return b.Name + "-config" }

// DefaultUserSecretName holds the default user's credentials.
func DefaultUserSecretName(b *warrenv1.Broker) string { return b.Name + "-default-user" }

// JoinSecretName holds the token nodes use to trust each other.
func JoinSecretName(b *warrenv1.Broker) string { return b.Name + "-cluster-join" }

// PodDisruptionBudgetName is the PodDisruptionBudget of the nodes.
func PodDisruptionBudgetName(b *warrenv1.Broker) string { return b.Name }

// ServiceMonitorName is the prometheus-operator ServiceMonitor.
func ServiceMonitorName(b *warrenv1.Broker) string { return b.Name }

// ClientHost is the client Service's DNS name inside the cluster.
func ClientHost(b *warrenv1.Broker) string {
	return fmt.Sprintf("%s.%s.svc", ClientServiceName(b), b.Namespace)
}

// HeadlessHost is the headless Service's DNS name inside the cluster.
func HeadlessHost(b *warrenv1.Broker) string {
	return fmt.Sprintf("%s.%s.svc", HeadlessServiceName(b), b.Namespace)
}

// Labels are on every child.
func Labels(b *warrenv1.Broker) map[string]string {
	l := SelectorLabels(b)
	l["app.kubernetes.io/component"] = "broker"
	l["app.kubernetes.io/part-of"] = "warren"
	l["app.kubernetes.io/managed-by"] = "warren-operator"
	return l
}

// SelectorLabels select a Broker's pods.
func SelectorLabels(b *warrenv1.Broker) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     "warren",
		"app.kubernetes.io/instance": b.Name,
	}
}

// Replicas is the desired replica count, defaulted.
func Replicas(b *warrenv1.Broker) int32 {
	if b.Spec.Replicas == nil {
		return 3
	}
	return *b.Spec.Replicas
}

func mergeLabels(dst map[string]string, src map[string]string) map[string]string {
	if dst == nil {
		dst = map[string]string{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

// PodName is the name of the Broker's pod of the given ordinal.
func PodName(b *warrenv1.Broker, ordinal int32) string {
	return fmt.Sprintf("%s-%d", StatefulSetName(b), ordinal)
}

// NodeName is the cluster node name (cluster.node_name, the Raft server
// id) of the pod of the given ordinal: the StatefulSet sets
// WARREN_CLUSTER_NODE_NAME to it, and it stays the same across restarts.
func NodeName(b *warrenv1.Broker, ordinal int32) string {
	return fmt.Sprintf("warren@%s.%s.%s", PodName(b, ordinal), HeadlessServiceName(b), b.Namespace)
}
