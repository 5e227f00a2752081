package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/brokerapi"
)

// warrenProcess is a real warren node started by a test.
type warrenProcess struct {
	cmd     *exec.Cmd
	apiURL  string
	user    string
	pass    string
	logFile string
}

// startWarren builds cmd/warren and runs it with the config file the
// operator rendered (listeners moved to free loopback ports, data in a temp
// dir) and env, the environment the StatefulSet gives its pods.
func startWarren(t *testing.T, configYAML, user, pass string, env []string) *warrenProcess {
	t.Helper()
	dir := t.TempDir()
	// Neutral file names: other tests on a shared machine may stop their own
	// brokers by name.
	bin := filepath.Join(dir, "node-under-test")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/warren")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/warren: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--config", cfg, "--data-dir", filepath.Join(dir, "data")}
	var apiPort int
	for _, key := range []string{"amqp.listen", "stream.listen", "http.listen", "prometheus.listen", "cluster.listen"} {
		p := freePort(t)
		if key == "http.listen" {
			apiPort = p
		}
		args = append(args, "--set", fmt.Sprintf("%s=127.0.0.1:%d", key, p))
	}
	p := &warrenProcess{apiURL: fmt.Sprintf("http://127.0.0.1:%d", apiPort), user: user, pass: pass, logFile: filepath.Join(dir, "node.log")}
	logf, err := os.Create(p.logFile)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start warren: %v", err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(p.logFile)
			t.Logf("warren log:\n%s", out)
		}
	})
	eventually(t, 30*time.Second, "warren /readyz", func() error {
		resp, err := http.Get(p.apiURL + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// createPods plays the StatefulSet controller and the kubelet: pod i of
// the Broker exists, with its Ready condition as given.
func createPods(t *testing.T, b *warrenv1.Broker, ready ...bool) {
	t.Helper()
	ctx := context.Background()
	sts := statefulSetOf(t, b)
	for i, r := range ready {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: fmt.Sprintf("%s-%d", sts.Name, i), Labels: sts.Spec.Template.Labels},
			Spec:       *sts.Spec.Template.Spec.DeepCopy(),
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + pod.Name}}})
		if err := testClient.Create(ctx, pod); err != nil {
			t.Fatalf("create pod: %v", err)
		}
		status := corev1.ConditionFalse
		if r {
			status = corev1.ConditionTrue
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = fmt.Sprintf("10.0.0.%d", i+1)
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		if err := testClient.Status().Update(ctx, pod); err != nil {
			t.Fatalf("pod status: %v", err)
		}
	}
}

// podEnv resolves the broker container's environment as the kubelet would
// for pod ordinal i: field references, Secret keys and $(VAR) expansion.
func podEnv(t *testing.T, sts *appsv1.StatefulSet, i int) []string {
	t.Helper()
	vars := map[string]string{}
	var env []string
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				v = fmt.Sprintf("%s-%d", sts.Name, i)
			case "metadata.namespace":
				v = sts.Namespace
			default:
				t.Fatalf("env %s: unexpected field %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sts.Namespace, Name: e.ValueFrom.SecretKeyRef.Name}}
			if err := getObj(sec); err != nil {
				t.Fatalf("env %s: %v", e.Name, err)
			}
			v = string(sec.Data[e.ValueFrom.SecretKeyRef.Key])
		default:
			v = os.Expand(strings.NewReplacer("$(", "${", ")", "}").Replace(v), func(k string) string { return vars[k] })
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	return env
}

// vhost reads a vhost straight from the broker's API, as a user with curl would.
func (p *warrenProcess) vhost(name string) (map[string]any, error) {
	return p.get("/api/vhosts/" + name)
}

// get reads a JSON object from the broker's API with the default user.
func (p *warrenProcess) get(path string) (map[string]any, error) {
	req, err := http.NewRequest(http.MethodGet, p.apiURL+path, nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(p.user, p.pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	var v map[string]any
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// expectVhost waits until the broker reports the vhost with the given
// default queue type and storage (as the API's JSON, missing keys absent).
func (p *warrenProcess) expectVhost(t *testing.T, name, queueType string, storage map[string]any) {
	t.Helper()
	eventually(t, 30*time.Second, "vhost "+name+" on the broker", func() error {
		v, err := p.vhost(name)
		if err != nil {
			return err
		}
		got, _ := v["storage"].(map[string]any)
		if got == nil {
			got = map[string]any{}
		}
		if v["default_queue_type"] != queueType || !reflect.DeepEqual(got, storage) {
			return fmt.Errorf("default_queue_type %v storage %v; want %s %v", v["default_queue_type"], got, queueType, storage)
		}
		return nil
	})
}

// Issue 4 item 3: per-vhost storage policies reach a running broker through
// its HTTP API, and a policy change rolls no pod.
func TestVhostPoliciesReachRunningBrokerWithoutRestart(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	b := newBroker(ns, "policies", func(b *warrenv1.Broker) {
		b.Spec.Vhosts = []warrenv1.VhostSpec{
			{Name: "orders", DefaultQueueType: "quorum", Storage: warrenv1.VhostStorage{QueueVersion: ptr.To[int32](1), EmbedMessagesBelow: ptr.To[int32](1024)}},
			{Name: "events", DefaultQueueType: "stream", Storage: warrenv1.VhostStorage{StreamReadAhead: ptr.To(false)}},
		}
	})
	createBroker(t, b)

	// The node runs with the config file and the credentials the operator made.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policies-config"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "policies-default-user"}}
	eventually(t, 20*time.Second, "ConfigMap and Secret", func() error {
		if err := getObj(cm); err != nil {
			return err
		}
		return getObj(sec)
	})
	// Two nodes run (as pods 0 and 1, ready); pod 2 is not ready. Until the
	// cluster shares its metadata, each node must get the policies itself.
	sts := statefulSetOf(t, b)
	var nodes []*warrenProcess
	for i := range 2 {
		env := podEnv(t, sts, i)
		node := startWarren(t, cm.Data["warren.yaml"], string(sec.Data["username"]), string(sec.Data["password"]), env)
		overview, err := node.get("/api/overview")
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("warren@policies-server-%d.policies-nodes.%s", i, ns); overview["node"] != want {
			t.Errorf("node name from the pod's environment: %v, want %s", overview["node"], want)
		}
		nodeURLs.Store(fmt.Sprintf("%s/policies-server-%d", ns, i), node.apiURL)
		nodes = append(nodes, node)
	}
	createPods(t, b, true, true, false)
	setReady(t, b, 2)

	for _, node := range nodes {
		node.expectVhost(t, "orders", "quorum", map[string]any{"queue-version": 1.0, "embed-messages-below": 1024.0})
		node.expectVhost(t, "events", "stream", map[string]any{"stream-read-ahead": false})
	}
	eventFor(t, b, "VhostPolicyApplied", `created vhost "orders" on policies-server-0, policies-server-1`)
	node := nodes[0]
	template := sts.Spec.Template.DeepCopy()
	generation := sts.Generation

	updateBroker(t, b, func(b *warrenv1.Broker) {
		b.Spec.Vhosts[0].Storage = warrenv1.VhostStorage{QueueVersion: ptr.To[int32](2), EmbedMessagesBelow: ptr.To[int32](8192)}
		b.Spec.Vhosts[1].Storage = warrenv1.VhostStorage{StreamReadAhead: ptr.To(true), StreamReadAheadLimit: ptr.To[int32](65536)}
	})
	for _, node := range nodes {
		node.expectVhost(t, "orders", "quorum", map[string]any{"queue-version": 2.0, "embed-messages-below": 8192.0})
		node.expectVhost(t, "events", "stream", map[string]any{"stream-read-ahead": true, "stream-read-ahead-limit": 65536.0})
	}
	eventFor(t, b, "VhostPolicyApplied", `updated vhost "events" on policies-server-0, policies-server-1`)

	if err := getObj(sts); err != nil {
		t.Fatal(err)
	}
	if sts.Generation != generation || !reflect.DeepEqual(&sts.Spec.Template, template) {
		t.Errorf("a policy change touched the StatefulSet: generation %d -> %d", generation, sts.Generation)
	}
	eventually(t, 10*time.Second, "status.vhosts", func() error {
		if err := getObj(b); err != nil {
			return err
		}
		if len(b.Status.Vhosts) != 2 || b.Status.Vhosts[1].ObservedGeneration != b.Generation {
			return fmt.Errorf("status.vhosts %+v at generation %d", b.Status.Vhosts, b.Generation)
		}
		return nil
	})
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionTrue, warrenv1.ReasonSuccess)

	// A change made behind the operator's back is undone at the next resync.
	api := &brokerapi.Client{BaseURL: node.apiURL, Username: node.user, Password: node.pass}
	if err := api.PutVhost(ctx, brokerapi.Vhost{Name: "orders", DefaultQueueType: "classic", Storage: brokerapi.Storage{QueueVersion: 1}}); err != nil {
		t.Fatal(err)
	}
	node.expectVhost(t, "orders", "quorum", map[string]any{"queue-version": 2.0, "embed-messages-below": 8192.0})
}

// When the broker refuses a policy or cannot be reached, the Broker says so.
func TestVhostPolicyErrorIsReported(t *testing.T) {
	ns := newNamespace(t)
	b := newBroker(ns, "unreachable", func(b *warrenv1.Broker) {
		b.Spec.Vhosts = []warrenv1.VhostSpec{{Name: "orders"}}
	})
	createBroker(t, b)
	statefulSetOf(t, b)
	createPods(t, b, true) // ready, but nothing answers on its API
	setReady(t, b, 1)
	condition(t, b, warrenv1.ConditionReconcileSuccess, metav1.ConditionFalse, warrenv1.ReasonVhostPolicyError)
	e := eventFor(t, b, warrenv1.ReasonVhostPolicyError, `pod unreachable-server-0: vhost "orders"`)
	if !strings.Contains(e.Note, "connection refused") {
		t.Errorf("event note %q does not say why", e.Note)
	}
}
