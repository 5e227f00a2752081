package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	res "github.com/warrenmq/warren/controllers/resource"
)

func newBroker(ns, name string, mutate ...func(*warrenv1.Broker)) *warrenv1.Broker {
	b := &warrenv1.Broker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       warrenv1.BrokerSpec{Replicas: ptr.To[int32](3)},
	}
	for _, m := range mutate {
		m(b)
	}
	return b
}

func createBroker(t *testing.T, b *warrenv1.Broker) {
	t.Helper()
	if err := testClient.Create(context.Background(), b); err != nil {
		t.Fatalf("create Broker: %v", err)
	}
}

func statefulSetOf(t *testing.T, b *warrenv1.Broker) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: res.StatefulSetName(b)}}
	eventually(t, 20*time.Second, "StatefulSet", func() error { return getObj(sts) })
	return sts
}

// setReady plays the kubelet and StatefulSet controller: n of the pods are
// ready.
func setReady(t *testing.T, b *warrenv1.Broker, n int32) {
	t.Helper()
	sts := statefulSetOf(t, b)
	eventually(t, 10*time.Second, "StatefulSet status", func() error {
		if err := getObj(sts); err != nil {
			return err
		}
		sts.Status.ObservedGeneration = sts.Generation
		sts.Status.Replicas = *sts.Spec.Replicas
		sts.Status.ReadyReplicas = n
		sts.Status.AvailableReplicas = n
		sts.Status.CurrentReplicas = *sts.Spec.Replicas
		sts.Status.UpdatedReplicas = *sts.Spec.Replicas
		return testClient.Status().Update(context.Background(), sts)
	})
}

func condition(t *testing.T, b *warrenv1.Broker, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	eventually(t, 20*time.Second, fmt.Sprintf("condition %s=%s (%s)", typ, status, reason), func() error {
		got := &warrenv1.Broker{}
		if err := testClient.Get(context.Background(), client.ObjectKeyFromObject(b), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		if c == nil {
			return fmt.Errorf("no condition %s in %+v", typ, got.Status.Conditions)
		}
		if c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("%s is %s (%s: %s)", typ, c.Status, c.Reason, c.Message)
		}
		return nil
	})
}

func updateBroker(t *testing.T, b *warrenv1.Broker, mutate func(*warrenv1.Broker)) {
	t.Helper()
	eventually(t, 10*time.Second, "update Broker", func() error {
		if err := getObj(b); err != nil {
			return err
		}
		mutate(b)
		return testClient.Update(context.Background(), b)
	})
}

func TestCreateBuildsEveryChild(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "orders", func(b *warrenv1.Broker) {
		b.Spec.Persistence.Size = resource.MustParse("20Gi")
		b.Spec.Service.Annotations = map[string]string{"example.com/lb": "internal"}
	})
	createBroker(t, b)
	sts := statefulSetOf(t, b)
	ctx := context.Background()

	if err := getObj(b); err != nil {
		t.Fatal(err)
	}
	children := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-config"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-default-user"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-cluster-join"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-nodes"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}},
		sts,
	}
	for _, c := range children {
		eventually(t, 10*time.Second, fmt.Sprintf("%T %s", c, c.GetName()), func() error { return getObj(c) })
		if !metav1IsControlledBy(c, b) {
			t.Errorf("%T %s is not controlled by the Broker: %+v", c, c.GetName(), c.GetOwnerReferences())
		}
	}
	if !strings.Contains(children[0].(*corev1.ConfigMap).Data["warren.yaml"], "dns: orders-nodes."+ns+".svc") {
		t.Errorf("config has no cluster DNS:\n%s", children[0].(*corev1.ConfigMap).Data["warren.yaml"])
	}
	user := children[1].(*corev1.Secret)
	if len(user.Data["username"]) == 0 || len(user.Data["password"]) < 20 {
		t.Errorf("default user not generated: %v", user.Data)
	}
	if want := "amqp://" + string(user.Data["username"]) + ":" + string(user.Data["password"]) + "@orders." + ns + ".svc:5672"; string(user.Data["uri"]) != want {
		t.Errorf("uri = %s, want %s", user.Data["uri"], want)
	}
	if len(children[2].(*corev1.Secret).Data["token"]) < 32 {
		t.Error("join token not generated")
	}
	headless := children[3].(*corev1.Service)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service: clusterIP %q publishNotReady %v", headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	clientSvc := children[4].(*corev1.Service)
	if clientSvc.Annotations["example.com/lb"] != "internal" || len(clientSvc.Spec.Ports) != 4 {
		t.Errorf("client Service: annotations %v ports %v", clientSvc.Annotations, clientSvc.Spec.Ports)
	}
	if pdb := children[5].(*policyv1.PodDisruptionBudget); pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable = %v", pdb.Spec.MaxUnavailable)
	}

	// The StatefulSet: what issue 4 asks of it, as a user would read it.
	spec := sts.Spec
	if *spec.Replicas != 3 || spec.PodManagementPolicy != appsv1.ParallelPodManagement || spec.ServiceName != "orders-nodes" {
		t.Errorf("replicas %d, pod management %s, serviceName %s", *spec.Replicas, spec.PodManagementPolicy, spec.ServiceName)
	}
	pod := spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "docker.io/warrenmq/warren:test" {
		t.Errorf("image %s, want the operator's default", c.Image)
	}
	if c.StartupProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes: startup %v readiness %v liveness %v", c.StartupProbe, c.ReadinessProbe, c.LivenessProbe)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil ||
		strings.Join(c.Lifecycle.PreStop.Exec.Command, " ") != "/usr/local/bin/warren ctl drain --quiet --delay 10s" {
		t.Errorf("preStop %+v, want the drain", c.Lifecycle)
	}
	// warren ctl in the pod (the preStop drain) calls the node's API as the
	// default user.
	env := podEnv(t, sts, 1)
	for _, want := range []string{
		"WARREN_USER=" + string(userSecret(t, b).Data["username"]),
		"WARREN_PASSWORD=" + string(userSecret(t, b).Data["password"]),
		"WARREN_CLUSTER_NODE_NAME=" + res.NodeName(b, 1),
		// The pod's IP (podEnv plays a kubelet whose pod IP is loopback).
		"WARREN_CLUSTER_ADVERTISE=127.0.0.1:25672",
	} {
		if !slices.Contains(env, want) {
			t.Errorf("pod 1's environment %q lacks %q", env, want)
		}
	}
	if sc := c.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v", sc)
	}
	if pod.SecurityContext == nil || !*pod.SecurityContext.RunAsNonRoot || *pod.SecurityContext.RunAsUser == 0 {
		t.Errorf("pod security context %+v", pod.SecurityContext)
	}
	aa := pod.Affinity.PodAntiAffinity
	if aa == nil || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Errorf("anti-affinity must be preferred, never required: %+v", aa)
	}
	zone := false
	for _, tsc := range pod.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("topology spread %s is %s, want ScheduleAnyway", tsc.TopologyKey, tsc.WhenUnsatisfiable)
		}
		zone = zone || tsc.TopologyKey == corev1.LabelTopologyZone
	}
	if !zone {
		t.Error("no zone topology spread")
	}
	if spec.Template.Annotations[res.ConfigHashAnnotation] == "" {
		t.Error("no config hash on the pod template")
	}
	if len(spec.VolumeClaimTemplates) != 1 || spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "20Gi" {
		t.Errorf("PVC template %+v", spec.VolumeClaimTemplates)
	}
	eventFor(t, b, "Created", "StatefulSet orders-server")

	// Defaults were filled in by the API server, and the finalizer is on.
	got := &warrenv1.Broker{}
	eventually(t, 10*time.Second, "finalizer and status", func() error {
		if err := testClient.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
			return err
		}
		if len(got.Finalizers) != 1 || got.Status.ObservedGeneration != got.Generation || got.Status.DefaultUser == nil {
			return fmt.Errorf("finalizers %v status %+v", got.Finalizers, got.Status)
		}
		return nil
	})
	if got.Spec.Service.Type != corev1.ServiceTypeClusterIP || *got.Spec.TerminationGracePeriodSeconds != 300 {
		t.Errorf("defaults not applied: %+v", got.Spec)
	}
	if got.Status.Endpoints.AMQP != "amqp://orders."+ns+".svc:5672" || got.Status.DefaultUser.SecretName != "orders-default-user" {
		t.Errorf("status endpoints %+v default user %+v", got.Status.Endpoints, got.Status.DefaultUser)
	}
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)
	condition(t, b, warrenv1.ConditionReady, metav1.ConditionFalse, "NotReady")

	// Reconciles without a spec change (here: pods becoming ready) change no
	// child: nothing would roll or flap.
	generation := sts.Generation
	setReady(t, b, 3)
	condition(t, b, warrenv1.ConditionAllReplicasReady, metav1.ConditionTrue, "AllPodsReady")
	if err := getObj(sts); err != nil {
		t.Fatal(err)
	}
	if sts.Generation != generation {
		t.Errorf("StatefulSet generation %d -> %d without a spec change", generation, sts.Generation)
	}
	var list eventsv1.EventList
	if err := testClient.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == "Updated" {
			t.Errorf("a child was updated without a spec change: %s", e.Note)
		}
	}
}

func TestDefaultUserSecretKeptWhenPresent(t *testing.T) {
	ns := newNamespace(t)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine-default-user"},
		StringData: map[string]string{"username": "alice", "password": "s3cret-s3cret"}}
	if err := testClient.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	b := newBroker(ns, "mine")
	createBroker(t, b)
	eventually(t, 20*time.Second, "secret filled in", func() error {
		if err := getObj(sec); err != nil {
			return err
		}
		if string(sec.Data["uri"]) != "amqp://alice:s3cret-s3cret@mine."+ns+".svc:5672" {
			return fmt.Errorf("uri %q", sec.Data["uri"])
		}
		return nil
	})
	if string(sec.Data["password"]) != "s3cret-s3cret" {
		t.Errorf("password replaced: %q", sec.Data["password"])
	}
}

// Pod readiness makes AllReplicasReady; it cannot make the cluster
// available: that comes from the cluster's own status (cluster_test.go).
func TestStatusConditionsFollowReadiness(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "status")
	createBroker(t, b)
	statefulSetOf(t, b)
	condition(t, b, warrenv1.ConditionClusterAvailable, metav1.ConditionFalse, "ClusterStatusUnavailable")
	condition(t, b, warrenv1.ConditionQuorumHealthy, metav1.ConditionFalse, "ClusterStatusUnavailable")

	for _, s := range []struct {
		ready    int32
		allReady metav1.ConditionStatus
	}{{1, metav1.ConditionFalse}, {3, metav1.ConditionTrue}, {2, metav1.ConditionFalse}} {
		setReady(t, b, s.ready)
		condition(t, b, warrenv1.ConditionAllReplicasReady, s.allReady, "")
		// No node answers its API (nothing runs behind these pods).
		condition(t, b, warrenv1.ConditionClusterAvailable, metav1.ConditionFalse, "ClusterStatusUnavailable")
		condition(t, b, warrenv1.ConditionReady, metav1.ConditionFalse, "NotReady")
		eventually(t, 10*time.Second, "status.readyReplicas", func() error {
			if err := getObj(b); err != nil {
				return err
			}
			if b.Status.ReadyReplicas != s.ready {
				return fmt.Errorf("readyReplicas %d, want %d", b.Status.ReadyReplicas, s.ready)
			}
			return nil
		})
	}
	eventFor(t, b, "AllPodsReady", "AllReplicasReady is True: 3 of 3 nodes ready")
	eventFor(t, b, "NotAllPodsReady", "AllReplicasReady is False: 2 of 3 nodes ready")
}

func TestUpdateImageRollsConfigChangeRolls(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "roll")
	createBroker(t, b)
	sts := statefulSetOf(t, b)
	hash := sts.Spec.Template.Annotations[res.ConfigHashAnnotation]

	updateBroker(t, b, func(b *warrenv1.Broker) { b.Spec.Image = "docker.io/warrenmq/warren:v2" })
	eventually(t, 20*time.Second, "new image in the pod template", func() error {
		if err := getObj(sts); err != nil {
			return err
		}
		if img := sts.Spec.Template.Spec.Containers[0].Image; img != "docker.io/warrenmq/warren:v2" {
			return fmt.Errorf("image %s", img)
		}
		return nil
	})
	if sts.Spec.Template.Annotations[res.ConfigHashAnnotation] != hash {
		t.Error("an image change changed the config hash")
	}
	eventFor(t, b, "Updated", "StatefulSet roll-server")

	updateBroker(t, b, func(b *warrenv1.Broker) {
		b.Spec.Config = &apiextensionsv1.JSON{Raw: []byte(`{"limits": {"max_message_size": 1048576}}`)}
	})
	eventually(t, 20*time.Second, "new config hash", func() error {
		if err := getObj(sts); err != nil {
			return err
		}
		if sts.Spec.Template.Annotations[res.ConfigHashAnnotation] == hash {
			return errNotYet
		}
		return nil
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "roll-config"}}
	if err := getObj(cm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["warren.yaml"], "max_message_size: 1048576") {
		t.Errorf("spec.config not in the config file:\n%s", cm.Data["warren.yaml"])
	}

	// An override patch reaches the StatefulSet.
	updateBroker(t, b, func(b *warrenv1.Broker) {
		b.Spec.Override.StatefulSet = &apiextensionsv1.JSON{Raw: []byte(`{"spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}}`)}
	})
	eventually(t, 20*time.Second, "override applied", func() error {
		if err := getObj(sts); err != nil {
			return err
		}
		if sts.Spec.Template.Spec.NodeSelector["disk"] != "ssd" {
			return errNotYet
		}
		return nil
	})
}

func TestDeleteRemovesStatefulSetThenReleasesFinalizer(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "gone")
	createBroker(t, b)
	sts := statefulSetOf(t, b)
	eventually(t, 10*time.Second, "finalizer", func() error {
		if err := getObj(b); err != nil {
			return err
		}
		if len(b.Finalizers) == 0 {
			return errNotYet
		}
		return nil
	})
	if err := testClient.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "StatefulSet deleted", func() error {
		if err := getObj(sts); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	eventually(t, 20*time.Second, "Broker gone", func() error {
		if err := getObj(b); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v), finalizers %v", err, b.Finalizers)
		}
		return nil
	})
	// The other children are owned by the Broker: the garbage collector (not
	// running in this test) removes them.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}}
	if err := getObj(svc); err != nil {
		t.Fatal(err)
	}
	if refs := svc.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Broker" || !*refs[0].BlockOwnerDeletion {
		t.Errorf("client Service owner references %+v", refs)
	}
}

func TestPauseStopsChanges(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "paused")
	createBroker(t, b)
	sts := statefulSetOf(t, b)
	updateBroker(t, b, func(b *warrenv1.Broker) {
		b.Annotations = map[string]string{warrenv1.PausedAnnotation: "true"}
		b.Spec.Image = "docker.io/warrenmq/warren:paused"
	})
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionFalse, warrenv1.ReasonPaused)
	eventFor(t, b, warrenv1.ReasonPaused, "changes no child")
	consistently(t, time.Second, "paused: image unchanged", func() error {
		if err := getObj(sts); err != nil {
			return err
		}
		if sts.Spec.Template.Spec.Containers[0].Image == "docker.io/warrenmq/warren:paused" {
			return fmt.Errorf("image changed while paused")
		}
		return nil
	})
	updateBroker(t, b, func(b *warrenv1.Broker) { delete(b.Annotations, warrenv1.PausedAnnotation) })
	eventually(t, 20*time.Second, "image applied after resume", func() error {
		if err := getObj(sts); err != nil {
			return err
		}
		if sts.Spec.Template.Spec.Containers[0].Image != "docker.io/warrenmq/warren:paused" {
			return errNotYet
		}
		return nil
	})
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)
}

// A spec the operator cannot turn into children (here an override patch
// that does not fit a StatefulSet) is reported, not retried.
func TestInvalidOverrideReported(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "badpatch", func(b *warrenv1.Broker) {
		b.Spec.Override.StatefulSet = &apiextensionsv1.JSON{Raw: []byte(`{"spec": {"replicas": "three"}}`)}
	})
	createBroker(t, b)
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionFalse, warrenv1.ReasonInvalidSpec)
	e := eventFor(t, b, warrenv1.ReasonInvalidSpec, "spec.override.statefulSet")
	t.Logf("event: %s", e.Note)
	// Fixing the spec clears the condition and creates the StatefulSet.
	updateBroker(t, b, func(b *warrenv1.Broker) { b.Spec.Override.StatefulSet = nil })
	statefulSetOf(t, b)
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)
}
