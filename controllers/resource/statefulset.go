package resource

import (
	"fmt"
	"path"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// UID and GID the broker runs as (the nonroot user of the warren image).
const nonRootID = 65532

// DataVolumeName is the name of the PVC template (PVCs are data-<pod>).
const DataVolumeName = "data"

// StatefulSetBuilder builds the StatefulSet of broker nodes.
type StatefulSetBuilder struct {
	Broker       *warrenv1.Broker
	DefaultImage string
	// Replicas to run (the reconciler's decision, see Options.Replicas).
	Replicas int32
	// ConfigHash goes on the pod template: a new hash rolls the pods.
	ConfigHash string
	// PodIPv6: the pods' primary IP is IPv6 (the headless Service's first
	// IP family, see PrimaryIPv6), so the advertised address brackets it.
	PodIPv6 bool
}

// PrimaryIPv6 reports whether a Service the API server has defaulted has
// IPv6 as its primary family: the family of the pods' status.podIP.
func PrimaryIPv6(svc *corev1.Service) bool {
	return len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
}

// Build returns the empty StatefulSet.
func (s *StatefulSetBuilder) Build() (client.Object, error) {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: StatefulSetName(s.Broker), Namespace: s.Broker.Namespace}}, nil
}

// Update sets the spec, keeping what cannot change once created (the PVC
// template, which the PVC reconcile grows by other means) and applying
// spec.override.statefulSet last.
func (s *StatefulSetBuilder) Update(obj client.Object) error {
	sts := obj.(*appsv1.StatefulSet)
	desired := s.desired()
	if o := s.Broker.Spec.Override.StatefulSet; o != nil && len(o.Raw) > 0 {
		if err := applyPatch(desired, o.Raw, "spec.override.statefulSet"); err != nil {
			return err
		}
	}
	sts.Labels = mergeLabels(sts.Labels, desired.Labels)
	claims := sts.Spec.VolumeClaimTemplates
	sts.Spec = desired.Spec
	if len(claims) > 0 {
		sts.Spec.VolumeClaimTemplates = claims
	}
	return nil
}

// Image is the broker image the StatefulSet runs.
func (s *StatefulSetBuilder) Image() string {
	if s.Broker.Spec.Image != "" {
		return s.Broker.Spec.Image
	}
	return s.DefaultImage
}

func (s *StatefulSetBuilder) desired() *appsv1.StatefulSet {
	b := s.Broker
	labels := Labels(b)
	selector := SelectorLabels(b)
	headless := HeadlessServiceName(b)
	pvc := PersistentVolumeClaimTemplate(b)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: StatefulSetName(b), Namespace: b.Namespace, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(s.Replicas),
			Selector:            &metav1.LabelSelector{MatchLabels: selector},
			ServiceName:         headless,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)},
			},
			// The data outlives the Broker. A scale-down removes a pod only
			// after its node was decommissioned (it left the cluster, its
			// memberships moved): its data is of no use, and a pod coming
			// back on it later would resume as a member the cluster no
			// longer has. So scaling deletes the PVC; a new pod of that
			// ordinal starts empty and joins.
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{pvc},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{ConfigHashAnnotation: s.ConfigHash},
				},
				Spec: s.podSpec(),
			},
		},
	}
}

// PersistentVolumeClaimTemplate is the PVC every node gets.
func PersistentVolumeClaimTemplate(b *warrenv1.Broker) corev1.PersistentVolumeClaim {
	size := b.Spec.Persistence.Size
	if size.IsZero() {
		size = resource.MustParse("10Gi")
	}
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: DataVolumeName, Labels: SelectorLabels(b)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: b.Spec.Persistence.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

func (s *StatefulSetBuilder) podSpec() corev1.PodSpec {
	b := s.Broker
	grace := terminationGrace(b)
	affinity := b.Spec.Affinity
	if affinity == nil {
		affinity = defaultAffinity(b)
	}
	spread := b.Spec.TopologySpreadConstraints
	if len(spread) == 0 {
		spread = defaultTopologySpread(b)
	}
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To(grace),
		ImagePullSecrets:              b.Spec.ImagePullSecrets,
		Affinity:                      affinity,
		Tolerations:                   b.Spec.Tolerations,
		TopologySpreadConstraints:     spread,
		AutomountServiceAccountToken:  ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:        ptr.To(true),
			RunAsUser:           ptr.To[int64](nonRootID),
			RunAsGroup:          ptr.To[int64](nonRootID),
			FSGroup:             ptr.To[int64](nonRootID),
			FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
			SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{s.container()},
		Volumes:    volumes(b),
	}
}

func volumes(b *warrenv1.Broker) []corev1.Volume {
	vs := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(b)}}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if b.Spec.TLS != nil {
		// Readable by the broker's group (fsGroup) only: it holds the key.
		vs = append(vs, corev1.Volume{Name: TLSVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: b.Spec.TLS.SecretName, DefaultMode: ptr.To[int32](0o440)}}})
	}
	return vs
}

func containerPorts(b *warrenv1.Broker) []corev1.ContainerPort {
	ports := []corev1.ContainerPort{
		{Name: "amqp", ContainerPort: PortAMQP, Protocol: corev1.ProtocolTCP},
		{Name: "stream", ContainerPort: PortStream, Protocol: corev1.ProtocolTCP},
		{Name: "http", ContainerPort: PortHTTP, Protocol: corev1.ProtocolTCP},
		{Name: "prometheus", ContainerPort: PortPrometheus, Protocol: corev1.ProtocolTCP},
		{Name: "cluster", ContainerPort: PortCluster, Protocol: corev1.ProtocolTCP},
	}
	if b.Spec.TLS != nil {
		ports = append(ports,
			corev1.ContainerPort{Name: "amqps", ContainerPort: PortAMQPS, Protocol: corev1.ProtocolTCP},
			corev1.ContainerPort{Name: "stream-tls", ContainerPort: PortStreamTLS, Protocol: corev1.ProtocolTCP})
	}
	return ports
}

func volumeMounts(b *warrenv1.Broker) []corev1.VolumeMount {
	ms := []corev1.VolumeMount{
		{Name: DataVolumeName, MountPath: DataDir},
		{Name: "config", MountPath: ConfigDir, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
	}
	if b.Spec.TLS != nil {
		ms = append(ms, corev1.VolumeMount{Name: TLSVolumeName, MountPath: TLSDir, ReadOnly: true})
	}
	return ms
}

// terminationGrace is the pods' grace period in seconds (300 by default:
// a drain and the queues' fsync of a busy node take a while).
func terminationGrace(b *warrenv1.Broker) int64 {
	if b.Spec.TerminationGracePeriodSeconds != nil {
		return *b.Spec.TerminationGracePeriodSeconds
	}
	return 300
}

// advertise is cluster.advertise: the pod's IP with the cluster port.
func (s *StatefulSetBuilder) advertise() string {
	if s.PodIPv6 {
		return fmt.Sprintf("[$(POD_IP)]:%d", PortCluster)
	}
	return fmt.Sprintf("$(POD_IP):%d", PortCluster)
}

// BrokerBinary is the broker's path in the warren image.
const BrokerBinary = "/usr/local/bin/warren"

// PreStopDrain is the preStop command: wait until the pod is out of the
// Services' endpoints (10 s, or a quarter of a short grace period), then
// `warren ctl drain` against the node's own API.
func PreStopDrain(graceSeconds int64) []string {
	delay := int64(10)
	if graceSeconds < 40 {
		delay = graceSeconds / 4
	}
	return []string{BrokerBinary, "ctl", "drain", "--quiet", "--delay", fmt.Sprintf("%ds", delay)}
}

func (s *StatefulSetBuilder) container() corev1.Container {
	b := s.Broker
	headless := HeadlessServiceName(b)
	grace := terminationGrace(b)
	secretEnv := func(name, secret, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
	}
	httpProbe := func(p string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: p, Port: intstr.FromString("http")}},
			PeriodSeconds:    period,
			TimeoutSeconds:   5,
			FailureThreshold: failures,
		}
	}
	resources := ContainerResources(b)
	pullPolicy := b.Spec.ImagePullPolicy
	if pullPolicy == "" {
		pullPolicy = corev1.PullIfNotPresent
	}
	return corev1.Container{
		Name:            "warren",
		Image:           s.Image(),
		ImagePullPolicy: pullPolicy,
		Args:            []string{"serve", "--config", path.Join(ConfigDir, ConfigFile)},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "WARREN_CLUSTER_NODE_NAME", Value: fmt.Sprintf("warren@$(POD_NAME).%s.$(POD_NAMESPACE)", headless)},
			{Name: "WARREN_STREAM_ADVERTISED_HOST", Value: fmt.Sprintf("$(POD_NAME).%s.$(POD_NAMESPACE).svc", headless)},
			secretEnv("WARREN_AUTH_DEFAULT_USER", DefaultUserSecretName(b), KeyUsername),
			secretEnv("WARREN_AUTH_DEFAULT_PASS", DefaultUserSecretName(b), KeyPassword),
			// Peers dial the pod's IP, not its DNS name: a restarted pod
			// has a new IP at once (it announces it to its peers), while
			// its DNS record may be cached with the old one for 30 s.
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "WARREN_CLUSTER_ADVERTISE", Value: s.advertise()},
			secretEnv("WARREN_CLUSTER_SECRET", JoinSecretName(b), KeyToken),
			// For `warren ctl` in the pod (the preStop drain): the API on
			// localhost with the default user.
			{Name: "WARREN_USER", Value: "$(WARREN_AUTH_DEFAULT_USER)"},
			{Name: "WARREN_PASSWORD", Value: "$(WARREN_AUTH_DEFAULT_PASS)"},
		},
		Ports:     containerPorts(b),
		Resources: resources,
		// Recovery of a large data directory may take minutes: the startup
		// probe allows 10 of them before liveness takes over.
		StartupProbe:   httpProbe("/healthz", 5, 120),
		LivenessProbe:  httpProbe("/healthz", 10, 6),
		ReadinessProbe: httpProbe("/readyz", 5, 3),
		Lifecycle: &corev1.Lifecycle{
			// Drain: the pod is leaving the Services' endpoints when preStop
			// runs; the hook waits for every proxy to stop sending it new
			// connections, then drains the node through its own API (its
			// leaderships move to the other nodes, then it closes its
			// clients, which reconnect elsewhere), so a rolling restart
			// never makes a group wait for an election. SIGTERM then
			// fsyncs the queues and stops (and would move leaderships
			// itself if the hook failed: on a single node, which has no
			// one to drain to, the hook reports that and SIGTERM stops it).
			PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: PreStopDrain(grace)}},
		},
		VolumeMounts: volumeMounts(b),
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			ReadOnlyRootFilesystem:   ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// ContainerResources are the broker container's resources: spec.resources,
// or defaults when it is not set.
func ContainerResources(b *warrenv1.Broker) corev1.ResourceRequirements {
	if b.Spec.Resources != nil {
		return *b.Spec.Resources
	}
	return defaultResources()
}

func defaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("250m"),
			corev1.ResourceMemory: resource.MustParse("512Mi"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
}

// defaultAffinity prefers (never requires) one broker pod per node, so that
// every replica still schedules on a single-node cluster.
func defaultAffinity(b *warrenv1.Broker) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(b)},
				TopologyKey:   corev1.LabelHostname,
			},
		}},
	}}
}

// defaultTopologySpread spreads the pods over zones, then nodes, as far as
// the cluster allows (ScheduleAnyway).
func defaultTopologySpread(b *warrenv1.Broker) []corev1.TopologySpreadConstraint {
	var out []corev1.TopologySpreadConstraint
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelHostname} {
		out = append(out, corev1.TopologySpreadConstraint{
			MaxSkew:           1,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: SelectorLabels(b)},
		})
	}
	return out
}
