//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/resource"
)

// perfMessages is how many messages the warren-perf Job publishes and consumes.
const perfMessages = 20000

// uriEnv is the default user's AMQP URI (the client Service's DNS name),
// from the Secret the operator made.
func uriEnv(b *warrenv1.Broker) corev1.EnvVar {
	return corev1.EnvVar{Name: "WARREN_URI", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: resource.DefaultUserSecretName(b)}, Key: resource.KeyURI}}}
}

func restricted() (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	return &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// perfResult is warren-perf's --json output.
type perfResult struct {
	Mode      string  `json:"mode"`
	Messages  int64   `json:"messages"`
	Seconds   float64 `json:"seconds"`
	MsgPerSec float64 `json:"msg_per_s"`
	Error     string  `json:"error"`
}

// testPerfJob runs warren-perf in a Job: an init container publishes with
// confirms (persistent, to a durable classic queue) through the client
// Service's DNS name, then the main container consumes every message back
// through the same name.
func testPerfJob(t *testing.T, ctx context.Context, b *warrenv1.Broker) {
	podSC, sc := restricted()
	perf := func(name string, args ...string) corev1.Container {
		return corev1.Container{Name: name, Image: image("warren-perf"), ImagePullPolicy: corev1.PullIfNotPresent,
			Args: args, Env: []corev1.EnvVar{uriEnv(b)}, SecurityContext: sc}
	}
	n := strconv.Itoa(perfMessages)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: "e2e-perf"},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To[int64](600),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SecurityContext: podSC,
				InitContainers: []corev1.Container{perf("publish", "amqp", "publish", "--uri", "$(WARREN_URI)",
					"--queue", "e2e-perf", "--declare", "classic", "--messages", n, "--size", "256", "--confirm", "--persistent",
					"--progress", "0", "--json", "-")},
				Containers: []corev1.Container{perf("consume", "amqp", "consume", "--uri", "$(WARREN_URI)",
					"--queue", "e2e-perf", "--messages", n, "--idle", "20s", "--progress", "0", "--json", "-")},
			}},
		},
	}
	if err := k.c.Create(ctx, job); err != nil {
		t.Fatalf("create Job: %v", err)
	}
	eventually(t, 10*time.Minute, "Job e2e-perf to finish", func() error {
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		if job.Status.Succeeded > 0 || job.Status.Failed > 0 {
			return nil
		}
		return fmt.Errorf("active %d", job.Status.Active)
	})
	pods := &corev1.PodList{}
	if err := k.c.List(ctx, pods, client.InNamespace(b.Namespace), client.MatchingLabels{"job-name": job.Name}); err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of Job %s: %v (%d)", job.Name, err, len(pods.Items))
	}
	pod := pods.Items[0].Name
	for _, c := range []string{"publish", "consume"} {
		logs, err := k.podLogs(ctx, b.Namespace, pod, c, false)
		if err != nil {
			t.Errorf("log of %s: %v", c, err)
			continue
		}
		t.Logf("warren-perf %s (pod %s):\n%s", c, pod, indent(logs))
		var r perfResult
		if err := jsonLine(logs, &r); err != nil {
			t.Errorf("%s: %v", c, err)
			continue
		}
		if r.Messages != perfMessages || r.Error != "" {
			t.Errorf("%s: %d messages (want %d), error %q", c, r.Messages, perfMessages, r.Error)
		}
	}
	if job.Status.Succeeded == 0 {
		t.Fatalf("Job %s failed: %+v", job.Name, job.Status.Conditions)
	}
}

// scrape reads one pod's Prometheus metrics through the API server's pod
// proxy and returns the unlabelled samples.
func scrape(ctx context.Context, ns, pod string) (map[string]float64, error) {
	raw, err := k.cs.CoreV1().Pods(ns).ProxyGet("http", pod, strconv.Itoa(resource.PortPrometheus), "/metrics", nil).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, nil
}

// testMetrics reads every node's metrics endpoint (port 15692): the
// messages the Job published and consumed are counted there, and the
// client Service serves the port the status advertises.
func testMetrics(t *testing.T, ctx context.Context, b *warrenv1.Broker) {
	var published, delivered float64
	for _, p := range brokerPods(t, ctx, b) {
		m, err := scrape(ctx, b.Namespace, p.Name)
		if err != nil {
			t.Fatalf("metrics of %s: %v", p.Name, err)
		}
		if _, ok := m["warren_connections"]; !ok {
			t.Errorf("metrics of %s lack warren_connections (%d samples)", p.Name, len(m))
		}
		published += m["warren_messages_published_total"]
		delivered += m["warren_messages_delivered_total"]
		t.Logf("%s: published %.0f, delivered %.0f, acknowledged %.0f, connections %.0f, go_goroutines %.0f",
			p.Name, m["warren_messages_published_total"], m["warren_messages_delivered_total"],
			m["warren_messages_acknowledged_total"], m["warren_connections"], m["go_goroutines"])
	}
	if published < perfMessages || delivered < perfMessages {
		t.Errorf("the nodes count %.0f published and %.0f delivered messages, want at least %d each", published, delivered, perfMessages)
	}
	raw, err := k.cs.CoreV1().Services(b.Namespace).ProxyGet("http", resource.ClientServiceName(b), strconv.Itoa(resource.PortPrometheus), "/metrics", nil).DoRaw(ctx)
	if err != nil || !strings.Contains(string(raw), "warren_messages_published_total") {
		t.Errorf("metrics through Service %s port %d: %v", resource.ClientServiceName(b), resource.PortPrometheus, err)
	}
}

// clientReport is warren-e2e-client's /stop answer.
type clientReport struct {
	Published   int64           `json:"published"`
	Confirmed   int64           `json:"confirmed"`
	Nacked      int64           `json:"nacked"`
	InDoubt     int64           `json:"in_doubt"`
	Connections int             `json:"connections"`
	Events      json.RawMessage `json:"events"`
	LongestGap  string          `json:"longest_gap_without_confirm"`
	LastConfirm time.Time       `json:"last_confirm"`
}

// clientVerification is warren-e2e-client's /verify answer.
type clientVerification struct {
	Confirmed        int64            `json:"confirmed"`
	Found            int64            `json:"found"`
	PerHost          map[string]int64 `json:"per_host"`
	MissingConfirmed int64            `json:"missing_confirmed"`
	MissingSample    []int64          `json:"missing_sample"`
	Duplicates       int64            `json:"duplicates"`
	InDoubtFound     int64            `json:"in_doubt_found"`
	InDoubtLost      int64            `json:"in_doubt_lost"`
	Unknown          int64            `json:"unknown"`
}

// clientCall calls warren-e2e-client's HTTP API through the pod proxy.
func clientCall(ctx context.Context, ns, pod, method, path string, query url.Values, out any) error {
	req := k.cs.CoreV1().RESTClient().Verb(method).Namespace(ns).Resource("pods").Name(pod + ":8080").SubResource("proxy").Suffix(path)
	for key, vs := range query {
		for _, v := range vs {
			req = req.Param(key, v)
		}
	}
	raw, err := req.Timeout(5 * time.Minute).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w (%s)", method, path, err, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: %w in %q", method, path, err, raw)
	}
	return nil
}

// testRollingUpdate changes spec.config while warren-e2e-client publishes
// with confirms through the client Service, and checks that the pods roll
// one at a time (never more than one broker pod not ready), that the
// client kept publishing (reconnecting when its node went away), and that
// every confirmed message is on some node afterwards. Each pod is a
// standalone node for now (no clustering yet): a message lives on the node
// that confirmed it, and survives that node's graceful restart on its
// persistent volume.
func testRollingUpdate(t *testing.T, ctx context.Context, b *warrenv1.Broker) {
	podSC, sc := restricted()
	cl := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: "e2e-roll-client"},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: podSC,
			Containers: []corev1.Container{{
				Name: "client", Image: image("warren-e2e-client"), ImagePullPolicy: corev1.PullIfNotPresent,
				Args:            []string{"--queue", "e2e-roll", "--rate", "200"},
				Env:             []corev1.EnvVar{uriEnv(b)},
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				SecurityContext: sc,
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/status", Port: intstr.FromString("http")}}, PeriodSeconds: 2},
			}},
		},
	}
	if err := k.c.Create(ctx, cl); err != nil {
		t.Fatalf("create client pod: %v", err)
	}
	var rep clientReport
	eventually(t, 3*time.Minute, "the client to publish", func() error {
		if err := clientCall(ctx, b.Namespace, cl.Name, "GET", "status", nil, &rep); err != nil {
			return err
		}
		if rep.Confirmed < 500 {
			return fmt.Errorf("%d confirmed", rep.Confirmed)
		}
		return nil
	})

	sts := &appsv1.StatefulSet{}
	stsKey := types.NamespacedName{Namespace: b.Namespace, Name: resource.StatefulSetName(b)}
	if err := k.c.Get(ctx, stsKey, sts); err != nil {
		t.Fatal(err)
	}
	oldRevision := sts.Status.UpdateRevision
	oldHash := sts.Spec.Template.Annotations[resource.ConfigHashAnnotation]
	oldUIDs := map[types.UID]bool{}
	for _, p := range brokerPods(t, ctx, b) {
		oldUIDs[p.UID] = true
	}
	patch := []byte(`{"spec":{"config":{"limits":{"max_message_size":16777216}}}}`)
	if err := k.c.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("patch spec.config: %v", err)
	}
	rollStart := time.Now()
	t.Logf("spec.config changed at %s with %d messages confirmed; watching the roll", rollStart.Format("15:04:05"), rep.Confirmed)

	// Watch the pods: at most one broker pod may be not ready at any time.
	minReady, transitions := 3, []string{}
	lastReady := map[string]bool{}
	eventually(t, 15*time.Minute, "the pods to roll", func() error {
		pods := brokerPods(t, ctx, b)
		ready := 0
		fresh := 0
		for i := range pods {
			p := &pods[i]
			r := podReady(p)
			if r {
				ready++
			}
			if !oldUIDs[p.UID] {
				fresh++
			}
			if prev, seen := lastReady[p.Name+string(p.UID)]; !seen || prev != r {
				transitions = append(transitions, fmt.Sprintf("%5.1fs %s (uid %.8s) ready=%v", time.Since(rollStart).Seconds(), p.Name, p.UID, r))
				lastReady[p.Name+string(p.UID)] = r
			}
		}
		// A pod that is missing (deleted, not yet recreated) counts as not ready.
		minReady = min(minReady, ready)
		if err := k.c.Get(ctx, stsKey, sts); err != nil {
			return err
		}
		s := sts.Status
		if s.UpdateRevision == oldRevision || s.CurrentRevision != s.UpdateRevision || s.UpdatedReplicas != 3 || s.ReadyReplicas != 3 || fresh != 3 || ready != 3 {
			return fmt.Errorf("revision %s->%s, updated %d, ready %d, new pods %d", s.CurrentRevision, s.UpdateRevision, s.UpdatedReplicas, s.ReadyReplicas, fresh)
		}
		return nil
	})
	rollTime := time.Since(rollStart)
	t.Logf("roll done in %s; pod readiness as observed (every ~2s):\n  %s", rollTime.Round(time.Second), strings.Join(transitions, "\n  "))
	if minReady < 2 {
		t.Errorf("at one point only %d of 3 broker pods were ready: the roll was not one at a time", minReady)
	}
	if err := k.c.Get(ctx, stsKey, sts); err == nil && sts.Spec.Template.Annotations[resource.ConfigHashAnnotation] == oldHash {
		t.Errorf("config hash on the pod template unchanged (%s)", oldHash)
	}
	eventually(t, 3*time.Minute, "the Broker to be Ready again", func() error {
		if err := k.c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, warrenv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || b.Status.ObservedGeneration != b.Generation {
			return fmt.Errorf("Ready %v, observedGeneration %d of %d", c, b.Status.ObservedGeneration, b.Generation)
		}
		return nil
	})

	// The client publishes on after the roll, then stops.
	time.Sleep(5 * time.Second)
	if err := clientCall(ctx, b.Namespace, cl.Name, "POST", "stop", nil, &rep); err != nil {
		t.Fatal(err)
	}
	events, _ := json.MarshalIndent(rep.Events, "  ", "  ")
	t.Logf("the client saw: %d published, %d confirmed, %d nacked, %d in doubt (in flight when a connection dropped), %d connections, longest time without a confirm %s; connection losses:\n  %s",
		rep.Published, rep.Confirmed, rep.Nacked, rep.InDoubt, rep.Connections, rep.LongestGap, events)
	if rep.Confirmed == 0 || !rep.LastConfirm.After(rollStart.Add(rollTime)) {
		t.Errorf("no confirm after the roll (last confirm %s)", rep.LastConfirm)
	}
	var v clientVerification
	q := url.Values{}
	for i := 0; i < 3; i++ {
		q.Add("host", nodeHost(b, i))
	}
	if err := clientCall(ctx, b.Namespace, cl.Name, "POST", "verify", q, &v); err != nil {
		t.Fatal(err)
	}
	t.Logf("on the nodes after the roll: %d messages (%v); %d of %d confirmed missing, %d duplicates, in doubt: %d there, %d not",
		v.Found, v.PerHost, v.MissingConfirmed, v.Confirmed, v.Duplicates, v.InDoubtFound, v.InDoubtLost)
	if v.MissingConfirmed != 0 || v.Unknown != 0 {
		t.Errorf("%d confirmed messages lost (first ids %v), %d unknown messages", v.MissingConfirmed, v.MissingSample, v.Unknown)
	}
	if err := k.c.Delete(ctx, cl); err != nil {
		t.Errorf("delete client pod: %v", err)
	}
}
