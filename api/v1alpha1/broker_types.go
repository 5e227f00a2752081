package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PausedAnnotation, set to "true" on a Broker, stops the operator from
// changing the Broker's children until it is removed. Status is still
// reported, with ReconcileSuccess False and reason Paused.
const PausedAnnotation = "warrenmq.io/paused"

// Broker is a Warren cluster: a StatefulSet of broker nodes that speak
// AMQP 0.9.1 and the RabbitMQ stream protocol, the Services that reach them,
// the default user's Secret, and the storage policy of each vhost.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wb,categories=all;warren
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="ReconcileSuccess")].reason`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Broker struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the cluster the user asks for.
	// +kubebuilder:default={}
	Spec BrokerSpec `json:"spec"`
	// Status is what the operator observed, written by the operator only.
	// +optional
	Status BrokerStatus `json:"status,omitempty"`
}

// BrokerList is a list of Brokers.
//
// +kubebuilder:object:root=true
type BrokerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Brokers.
	Items []Broker `json:"items"`
}

// BrokerSpec is the desired state of a Warren cluster.
type BrokerSpec struct {
	// Replicas is the number of broker nodes. It must be odd, so that a
	// Raft majority survives the loss of a minority of nodes. Growing adds
	// pods that join the cluster; shrinking decommissions the
	// highest-ordinal nodes one at a time (each moves its leaderships and
	// memberships away and leaves the cluster) before the StatefulSet
	// shrinks by one.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	// +kubebuilder:validation:XValidation:rule="self % 2 == 1",message="replicas must be odd (1, 3, 5, ...) so that a Raft majority survives the loss of a minority of nodes"
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image is the warren container image. Empty means the operator's
	// default image (its --broker-image flag). Changing it rolls the pods
	// one at a time.
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy of the broker container.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets are Secrets used to pull Image.
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Resources of the broker container. Empty means requests of 250m CPU
	// and 512Mi memory and a 2Gi memory limit. The broker's memory alarm
	// (which blocks publishers) is set at 40% of the memory limit, unless
	// Config sets limits.memory_high_watermark.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// Persistence is each node's volume: its data directory.
	// +kubebuilder:default={}
	// +optional
	Persistence PersistenceSpec `json:"persistence,omitempty"`

	// Service is the client Service, through which clients reach any node.
	// +kubebuilder:default={}
	// +optional
	Service ServiceSpec `json:"service,omitempty"`

	// TLS turns on AMQP over TLS (amqps, port 5671) and the stream
	// protocol over TLS (port 5551) next to the plain listeners, with the
	// certificate of a Secret. Changing it restarts the pods, one at a time.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Vhosts are the virtual hosts the operator creates in the cluster and
	// whose storage policy it keeps as written here. A change is applied to
	// the running cluster through the broker's HTTP API, without restarting
	// a pod. Vhosts removed from this list are left in the cluster. The
	// default vhost "/" may be listed to set its policy. Names are unique.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Vhosts []VhostSpec `json:"vhosts,omitempty"`

	// Monitoring configures Prometheus scraping of the nodes' metrics port
	// (15692).
	// +kubebuilder:default={}
	// +optional
	Monitoring MonitoringSpec `json:"monitoring,omitempty"`

	// Affinity of the broker pods. Empty means a preferred (never required)
	// pod anti-affinity across nodes, so that a single-node cluster still
	// schedules every replica.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Tolerations of the broker pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// TopologySpreadConstraints of the broker pods. Empty means spreading
	// across zones and across nodes with whenUnsatisfiable ScheduleAnyway.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// TerminationGracePeriodSeconds is how long a node may take to stop
	// gracefully (close clients, fsync queues, hand over leadership) before
	// it is killed.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// Config holds extra broker settings, written into the node's config
	// file over the operator's own: the keys of docs/configuration.md in
	// snake_case, nested as in the file, for example
	// {"limits": {"max_message_size": 16777216}}. The operator owns
	// data_dir, node_name, the listeners, auth and cluster; setting them here
	// overrides it at the user's risk. A change restarts the pods, one at a
	// time.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Config *apiextensionsv1.JSON `json:"config,omitempty"`

	// Override holds patches applied over what the operator builds, for
	// settings this spec does not cover.
	// +optional
	Override OverrideSpec `json:"override,omitempty"`
}

// PersistenceSpec is a node's persistent volume.
//
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="persistence.storageClassName is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.size) || !has(oldSelf.size) || quantity(string(self.size)).compareTo(quantity(string(oldSelf.size))) >= 0",message="persistence.size may grow but never shrink"
type PersistenceSpec struct {
	// StorageClassName of each node's PersistentVolumeClaim. Empty means the
	// cluster's default StorageClass. Immutable.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Size of each node's volume. It may grow: the operator then expands
	// every PersistentVolumeClaim (the StorageClass must allow volume
	// expansion). It may never shrink.
	// +kubebuilder:default="10Gi"
	// +optional
	Size resource.Quantity `json:"size,omitempty"`
}

// ServiceSpec is the client Service.
type ServiceSpec struct {
	// Type of the client Service.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// Annotations added to the client Service, for example for a cloud
	// load balancer.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// TLSSpec is the certificate of the TLS listeners.
type TLSSpec struct {
	// SecretName is a Secret in the Broker's namespace, of type
	// kubernetes.io/tls (as cert-manager writes them): tls.crt (the server
	// certificate chain, leaf first, valid for the names clients connect
	// to, such as the client Service's), tls.key, and optionally ca.crt.
	// With ca.crt, client certificates that clients present are verified
	// against it. The Secret is mounted read-only into the broker pods at
	// /etc/warren/tls; a missing Secret or key is reported in the
	// ReconcileSuccess condition (reason TLSSecretInvalid).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
}

// VhostSpec is a virtual host and its storage policy.
type VhostSpec struct {
	// Name of the vhost, for example "/" or "orders".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name"`

	// DefaultQueueType is the type of queues declared in this vhost without
	// an x-queue-type argument. Empty means classic.
	// +kubebuilder:validation:Enum=classic;quorum;stream
	// +optional
	DefaultQueueType string `json:"defaultQueueType,omitempty"`

	// Storage is the vhost's storage policy. Unset fields take the node's
	// defaults.
	// +optional
	Storage VhostStorage `json:"storage,omitempty"`
}

// VhostStorage is a vhost's storage policy. A change applies to the running
// cluster at once; a queue version change converts each classic queue's
// files, one queue at a time.
type VhostStorage struct {
	// QueueVersion is the on-disk layout of classic queues: 2 (per-queue
	// segment files, the default) or 1 (the older per-queue index with a
	// journal).
	// +kubebuilder:validation:Enum=1;2
	// +optional
	QueueVersion *int32 `json:"queueVersion,omitempty"`

	// EmbedMessagesBelow is the size in bytes under which a message is kept
	// in the queue's own files; larger messages go to the vhost's shared
	// message store, written once whatever the number of queues they reach.
	// Default 4096.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=134217728
	// +optional
	EmbedMessagesBelow *int32 `json:"embedMessagesBelow,omitempty"`

	// StreamReadAhead turns on reading ahead after a small stream chunk, so
	// that the following chunks are served from memory. Default true.
	// +optional
	StreamReadAhead *bool `json:"streamReadAhead,omitempty"`

	// StreamReadAheadLimit is how many bytes a stream reader reads ahead,
	// from 1 byte to 16 MiB. Default 4096.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777216
	// +optional
	StreamReadAheadLimit *int32 `json:"streamReadAheadLimit,omitempty"`
}

// MonitoringSpec configures metrics scraping.
type MonitoringSpec struct {
	// ServiceMonitor configures a prometheus-operator ServiceMonitor for the
	// nodes' metrics.
	// +kubebuilder:default={}
	// +optional
	ServiceMonitor ServiceMonitorSpec `json:"serviceMonitor,omitempty"`
}

// ServiceMonitorSpec configures the ServiceMonitor child.
type ServiceMonitorSpec struct {
	// Enabled creates a ServiceMonitor when the prometheus-operator CRD
	// (monitoring.coreos.com/v1 ServiceMonitor) is installed in the cluster;
	// without the CRD nothing is created and the condition
	// ReconcileSuccess says nothing about it.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Interval between scrapes, for example "30s".
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Pattern=`^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`
	// +optional
	Interval string `json:"interval,omitempty"`

	// Labels added to the ServiceMonitor, for a Prometheus serviceMonitorSelector.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// OverrideSpec holds patches over the operator's children.
type OverrideSpec struct {
	// StatefulSet is a strategic merge patch applied to the StatefulSet the
	// operator builds, for example to add a sidecar or a node selector.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	StatefulSet *apiextensionsv1.JSON `json:"statefulSet,omitempty"`

	// ClientService is a strategic merge patch applied to the client
	// Service the operator builds.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	ClientService *apiextensionsv1.JSON `json:"clientService,omitempty"`
}

// BrokerStatus is what the operator observed of a Broker.
type BrokerStatus struct {
	// ObservedGeneration is the metadata.generation of the spec the status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of pods of the StatefulSet.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of broker pods that pass their readiness
	// probe.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Conditions: Ready (every replica is ready and the cluster is
	// available), AllReplicasReady, ClusterAvailable (the cluster has a
	// metadata leader and a majority of its members answer, from the
	// cluster's own status), QuorumHealthy (every node is a running voting
	// member, so any one may stop), ReconcileSuccess (the last
	// reconcile applied the spec; its reason says what a user must fix when
	// it is False).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Endpoints are the addresses clients use, through the client Service.
	// +optional
	Endpoints *BrokerEndpoints `json:"endpoints,omitempty"`

	// DefaultUser is the Secret holding the default user's credentials.
	// +optional
	DefaultUser *DefaultUserStatus `json:"defaultUser,omitempty"`

	// Vhosts are the vhosts whose policy the operator applied, with the
	// generation at which it last applied them.
	// +optional
	Vhosts []VhostStatus `json:"vhosts,omitempty"`
}

// BrokerEndpoints are the client addresses of a Broker.
type BrokerEndpoints struct {
	// AMQP is the AMQP 0.9.1 URL, amqp://host:5672.
	AMQP string `json:"amqp,omitempty"`
	// Stream is the RabbitMQ stream protocol URL, rabbitmq-stream://host:5552.
	Stream string `json:"stream,omitempty"`
	// AMQPS is the AMQP 0.9.1 over TLS URL, amqps://host:5671, when
	// spec.tls is set.
	AMQPS string `json:"amqps,omitempty"`
	// StreamTLS is the stream protocol over TLS URL,
	// rabbitmq-stream+tls://host:5551, when spec.tls is set.
	StreamTLS string `json:"streamTLS,omitempty"`
	// HTTP is the HTTP API URL, http://host:15672.
	HTTP string `json:"http,omitempty"`
	// Metrics is the Prometheus metrics URL, http://host:15692/metrics.
	Metrics string `json:"metrics,omitempty"`
}

// DefaultUserStatus points at the default user's Secret.
type DefaultUserStatus struct {
	// SecretName is the Secret, in the Broker's namespace, with the keys
	// username, password, host, port and uri (amqp://user:pass@host:5672).
	SecretName string `json:"secretName,omitempty"`
	// ServiceName is the client Service.
	ServiceName string `json:"serviceName,omitempty"`
}

// VhostStatus is the applied state of one vhost.
type VhostStatus struct {
	// Name of the vhost.
	Name string `json:"name"`
	// ObservedGeneration is the Broker generation whose policy for this
	// vhost the cluster has.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}
