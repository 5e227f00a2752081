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
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers/brokerapi"
	res "github.com/warrenmq/warren/controllers/resource"
)

// warrenProcess is a real warren node started by a test, as one pod of a
// Broker: the config file the operator rendered, the pod's environment.
type warrenProcess struct {
	cmd     *exec.Cmd
	apiURL  string
	user    string
	pass    string
	logFile string
	pod     string
	node    string

	stopOnce sync.Once
	done     chan struct{}
}

// startWarrenCluster runs n real warren processes as pods 0..n-1 of the
// Broker: cmd/warren built from the repository, the ConfigMap's config file
// and each pod's environment (node name, join secret, default user) as the
// kubelet resolves them, with only what a pod gets from Kubernetes moved to
// loopback: listeners on free ports, cluster.advertise the node's own
// loopback port and the seed pod 0's, no DNS discovery. Pod 0 forms the
// cluster, the others join it. The operator's NodeURL reaches each pod's
// node.
func startWarrenCluster(t *testing.T, b *warrenv1.Broker, n int) []*warrenProcess {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: res.ConfigMapName(b)}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: res.DefaultUserSecretName(b)}}
	eventually(t, 20*time.Second, "ConfigMap and Secret", func() error {
		if err := getObj(cm); err != nil {
			return err
		}
		return getObj(sec)
	})
	sts := statefulSetOf(t, b)
	bin := buildWarren(t)
	clusterPorts := make([]int, n)
	for i := range clusterPorts {
		clusterPorts[i] = freePort(t)
	}
	var nodes []*warrenProcess
	for i := range n {
		sets := []string{
			fmt.Sprintf("cluster.listen=127.0.0.1:%d", clusterPorts[i]),
			fmt.Sprintf("cluster.advertise=127.0.0.1:%d", clusterPorts[i]),
			fmt.Sprintf("cluster.seeds=127.0.0.1:%d", clusterPorts[0]),
			"cluster.dns=",
		}
		p := startWarren(t, bin, cm.Data[res.ConfigFile], string(sec.Data[res.KeyUsername]), string(sec.Data[res.KeyPassword]), podEnv(t, sts, i), sets)
		p.pod, p.node = res.PodName(b, int32(i)), res.NodeName(b, int32(i))
		key := b.Namespace + "/" + p.pod
		nodeURLs.Store(key, p.apiURL)
		t.Cleanup(func() { nodeURLs.Delete(key) })
		nodes = append(nodes, p)
	}
	return nodes
}

// buildWarren builds cmd/warren for one test.
func buildWarren(t *testing.T) string {
	t.Helper()
	// A neutral file name: other tests on a shared machine may stop their
	// own brokers by name.
	bin := filepath.Join(t.TempDir(), "node-under-test")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/warren")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/warren: %v\n%s", err, out)
	}
	return bin
}

// startWarren runs bin with configYAML (its client listeners moved to free
// loopback ports, data in a temp dir), env and the extra --set flags, and
// waits until it is ready. It is stopped (SIGTERM) when the test ends.
func startWarren(t *testing.T, bin, configYAML, user, pass string, env, sets []string) *warrenProcess {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(cfg, []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--config", cfg, "--data-dir", filepath.Join(dir, "data")}
	var apiPort int
	for _, key := range []string{"amqp.listen", "stream.listen", "http.listen", "prometheus.listen"} {
		p := freePort(t)
		if key == "http.listen" {
			apiPort = p
		}
		args = append(args, "--set", fmt.Sprintf("%s=127.0.0.1:%d", key, p))
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	p := &warrenProcess{apiURL: fmt.Sprintf("http://127.0.0.1:%d", apiPort), user: user, pass: pass,
		logFile: filepath.Join(dir, "node.log"), done: make(chan struct{})}
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
	go func() { _ = p.cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			out, _ := os.ReadFile(p.logFile)
			t.Logf("warren log of %s:\n%s", p.pod, out)
		}
	})
	eventually(t, 60*time.Second, "warren /readyz", func() error {
		select {
		case <-p.done:
			out, _ := os.ReadFile(p.logFile)
			t.Fatalf("warren exited: %s", out)
		default:
		}
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

// stop stops the node as the kubelet does (SIGTERM, then SIGKILL after a
// grace period) and waits for it to exit.
func (p *warrenProcess) stop() {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// api is a client of the node's API with the default user.
func (p *warrenProcess) api() *brokerapi.Client {
	return &brokerapi.Client{BaseURL: p.apiURL, Username: p.user, Password: p.pass}
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
// the Broker exists, running, with its Ready condition as given.
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
// for pod ordinal i: field references (the pod's IP is 127.0.0.1), Secret
// keys and $(VAR) expansion.
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
			case "status.podIP":
				v = "127.0.0.1"
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

// userSecret waits for the Broker's default-user Secret and returns it.
func userSecret(t *testing.T, b *warrenv1.Broker) *corev1.Secret {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: res.DefaultUserSecretName(b)}}
	eventually(t, 20*time.Second, "default-user Secret", func() error { return getObj(sec) })
	return sec
}
