//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// sampleBroker is config/samples' Broker, as a user applies it, with the
// image under test (fully qualified, pulled only if not present). The
// client Service balances every connection on its own (no session
// affinity): the pods form one cluster, so a publisher and a consumer that
// land on different nodes still meet (the node that does not hold the
// queue forwards to the one that does).
func sampleBroker(t *testing.T) *warrenv1.Broker {
	t.Helper()
	raw, err := os.ReadFile("../config/samples/warrenmq_v1alpha1_broker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := &warrenv1.Broker{}
	if err := yaml.UnmarshalStrict(raw, b); err != nil {
		t.Fatalf("sample Broker: %v", err)
	}
	b.Namespace = testNamespace
	b.Spec.Image = envOr("E2E_BROKER_IMAGE", image("warren"))
	b.Spec.ImagePullPolicy = corev1.PullIfNotPresent
	return b
}

// TestBroker walks a user's path; each step needs the ones before it.
func TestBroker(t *testing.T) {
	ctx := context.Background()
	b := sampleBroker(t)
	steps := []struct {
		name string
		f    func(*testing.T, context.Context, *warrenv1.Broker)
	}{
		{"BecomesReady", testBecomesReady},
		{"StatusEventsPlacement", testStatusEventsPlacement},
		{"PerfJobThroughService", testPerfJob},
		{"Metrics", testMetrics},
		{"RollingConfigChange", testRollingUpdate},
		{"DeleteRemovesChildren", testDelete},
	}
	for _, s := range steps {
		start := time.Now()
		ok := t.Run(s.name, func(t *testing.T) { s.f(t, ctx, b) })
		t.Logf("step %s: %s in %s", s.name, map[bool]string{true: "ok", false: "FAILED"}[ok], time.Since(start).Round(time.Second))
		if !ok {
			t.FailNow()
		}
	}
}

func testBecomesReady(t *testing.T, ctx context.Context, b *warrenv1.Broker) {
	if *b.Spec.Replicas != 3 {
		t.Fatalf("the sample Broker has %d replicas, the suite expects 3", *b.Spec.Replicas)
	}
	if err := k.c.Create(ctx, b); err != nil {
		t.Fatalf("create Broker: %v", err)
	}
	t.Logf("created Broker %s/%s (image %s)", b.Namespace, b.Name, b.Spec.Image)
	timeout, err := time.ParseDuration(envOr("E2E_READY_TIMEOUT", "10m"))
	if err != nil {
		t.Fatalf("E2E_READY_TIMEOUT: %v", err)
	}
	eventually(t, timeout, "the Broker to be Ready", func() error {
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, warrenv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != b.Generation {
			return fmt.Errorf("readyReplicas %d, Ready %v", b.Status.ReadyReplicas, c)
		}
		return nil
	})
}

func testStatusEventsPlacement(t *testing.T, ctx context.Context, b *warrenv1.Broker) {
	if err := k.c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	st := b.Status
	if st.ObservedGeneration != b.Generation || st.ReadyReplicas != 3 || st.Replicas != 3 {
		t.Errorf("status: observedGeneration %d (generation %d), replicas %d, readyReplicas %d", st.ObservedGeneration, b.Generation, st.Replicas, st.ReadyReplicas)
	}
	for _, typ := range []string{warrenv1.ConditionReady, warrenv1.ConditionAllReplicasReady, warrenv1.ConditionClusterAvailable,
		warrenv1.ConditionQuorumHealthy, warrenv1.ConditionReconcileSuccess} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("condition %s = %+v, want True", typ, c)
		}
	}
	wantAMQP := fmt.Sprintf("amqp://%s.%s.svc:5672", b.Name, b.Namespace)
	if st.Endpoints == nil || st.Endpoints.AMQP != wantAMQP {
		t.Errorf("status.endpoints = %+v, want amqp %s", st.Endpoints, wantAMQP)
	}
	if st.DefaultUser == nil || st.DefaultUser.SecretName == "" {
		t.Fatalf("status.defaultUser = %+v", st.DefaultUser)
	}
	secret := &corev1.Secret{}
	if err := k.c.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: st.DefaultUser.SecretName}, secret); err != nil {
		t.Fatalf("default-user Secret: %v", err)
	}
	if !strings.Contains(string(secret.Data["uri"]), "@"+b.Name+"."+b.Namespace+".svc:5672") {
		t.Errorf("default-user Secret uri points elsewhere: host %s", secret.Data["host"])
	}
	t.Logf("status: %d/%d ready, endpoints %+v, default user in Secret %s", st.ReadyReplicas, st.Replicas, *st.Endpoints, st.DefaultUser.SecretName)

	// Events a user reads with kubectl describe broker.
	events := brokerEvents(t, ctx, b)
	var created, ready bool
	for _, e := range events {
		created = created || (e.Reason == "Created" && strings.Contains(e.Message, "StatefulSet"))
		ready = ready || (e.Type == corev1.EventTypeNormal && strings.Contains(e.Message, "Ready is True"))
	}
	if !created || !ready {
		t.Errorf("Broker events lack the StatefulSet's creation (%v) or Ready becoming True (%v): %v", created, ready, eventLines(events))
	}
	t.Logf("Broker events:\n%s", strings.Join(eventLines(events), "\n"))

	// Placement: the defaults only prefer spreading, so every replica
	// schedules even when the cluster has fewer nodes than replicas.
	nodes := &corev1.NodeList{}
	if err := k.c.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	pods := brokerPods(t, ctx, b)
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			t.Errorf("pod %s has a required anti-affinity", p.Name)
		}
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
				t.Errorf("pod %s: topology spread on %s is %s", p.Name, c.TopologyKey, c.WhenUnsatisfiable)
			}
		}
	}
	if len(pods) != 3 {
		t.Errorf("%d broker pods, want 3", len(pods))
	}
	t.Logf("%d nodes; broker pods per node: %v", len(nodes.Items), perNode)
}

func brokerEvents(t *testing.T, ctx context.Context, b *warrenv1.Broker) []corev1.Event {
	t.Helper()
	list := &corev1.EventList{}
	if err := k.c.List(ctx, list, client.InNamespace(b.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Broker" && e.InvolvedObject.Name == b.Name {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return eventTime(out[i]).Before(eventTime(out[j])) })
	return out
}

func eventLines(events []corev1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprintf("  %s %s %s: %s", eventTime(e).Format("15:04:05"), e.Type, e.Reason, e.Message))
	}
	return out
}

// brokerPods are the Broker's pods, by name.
func brokerPods(t *testing.T, ctx context.Context, b *warrenv1.Broker) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k.c.List(ctx, pods, client.InNamespace(b.Namespace), client.MatchingLabels(resource.SelectorLabels(b))); err != nil {
		t.Fatal(err)
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeHost is pod i's DNS name through the headless Service.
func nodeHost(b *warrenv1.Broker, i int) string {
	return fmt.Sprintf("%s-%d.%s.%s.svc", resource.StatefulSetName(b), i, resource.HeadlessServiceName(b), b.Namespace)
}

func testDelete(t *testing.T, ctx context.Context, b *warrenv1.Broker) {
	if err := k.c.Delete(ctx, b); err != nil {
		t.Fatalf("delete Broker: %v", err)
	}
	ns := b.Namespace
	children := []client.Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resource.StatefulSetName(b)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resource.ClientServiceName(b)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resource.HeadlessServiceName(b)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resource.ConfigMapName(b)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resource.DefaultUserSecretName(b)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resource.JoinSecretName(b)}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resource.PodDisruptionBudgetName(b)}},
	}
	start := time.Now()
	eventually(t, 6*time.Minute, "the Broker and its children to be gone", func() error {
		var left []string
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(b), &warrenv1.Broker{}); !apierrors.IsNotFound(err) {
			left = append(left, "Broker "+b.Name)
		}
		for _, c := range children {
			obj := c.DeepCopyObject().(client.Object)
			if err := k.c.Get(ctx, client.ObjectKeyFromObject(c), obj); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s", c, c.GetName()))
			}
		}
		if pods := brokerPods(t, ctx, b); len(pods) > 0 {
			left = append(left, fmt.Sprintf("%d pods", len(pods)))
		}
		if len(left) > 0 {
			return fmt.Errorf("still there: %s", strings.Join(left, ", "))
		}
		return nil
	})
	t.Logf("Broker and its %d children gone %s after the delete", len(children), time.Since(start).Round(time.Second))
	// The data outlives the Broker (retention policy Retain): the PVCs stay
	// until the user deletes them.
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := k.c.List(ctx, pvcs, client.InNamespace(ns), client.MatchingLabels(resource.SelectorLabels(b))); err != nil {
		t.Fatal(err)
	}
	if len(pvcs.Items) != 3 {
		t.Errorf("%d PVCs left after the delete, want the 3 data volumes (kept by design)", len(pvcs.Items))
	}
	for i := range pvcs.Items {
		if err := k.c.Delete(ctx, &pvcs.Items[i]); err != nil {
			t.Errorf("delete PVC %s: %v", pvcs.Items[i].Name, err)
		}
	}
}

// jsonLine returns the first line of s that is a JSON object, decoded into v.
func jsonLine(s string, v any) error {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "{") {
			return json.Unmarshal([]byte(line), v)
		}
	}
	return fmt.Errorf("no JSON line in %q", s)
}
