package controllers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// These tests check what a user installs, against the real API server
// (Kubernetes 1.37 schemas and our CRD): the kustomize bases and the Helm
// chart. Rendered objects go through a server-side dry-run apply with strict
// field validation, which refuses unknown fields and invalid values.

// kubeconfig writes a kubeconfig for the test API server.
func kubeconfig(t *testing.T) string {
	t.Helper()
	user, err := testEnv.AddUser(envtest.User{Name: "installer", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs a command and returns its stdout; a failure fails the test.
func run(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // building helm may take minutes
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repoRoot
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", filepath.Base(name), strings.Join(args, " "), err, errb.String(), out.String())
	}
	return out.Bytes()
}

func kubectl() string { return filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl") }

// helmBinary builds the pinned helm into ./bin (make helm-path) and returns it.
func helmBinary(t *testing.T) string {
	t.Helper()
	out := run(t, nil, "make", "--no-print-directory", "-s", "helm-path")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// dryRunApply applies manifests with a server-side dry run and strict
// field validation, and returns kubectl's report (one line per object).
func dryRunApply(t *testing.T, kc string, manifests []byte) string {
	t.Helper()
	return string(run(t, manifests, kubectl(), "--kubeconfig", kc, "apply", "--server-side", "--force-conflicts",
		"--field-manager", "test", "--dry-run=server", "--validate=strict", "-f", "-"))
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := testClient.Create(context.Background(), ns); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

func installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	if _, err := envtest.InstallCRDs(testConfig, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(repoRoot, "controllers", "testdata", "crds")}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("install the ServiceMonitor CRD: %v", err)
	}
}

func TestKustomizeBasesBuildAndApply(t *testing.T) {
	kc := kubeconfig(t)
	ensureNamespace(t, "warren-system")
	for _, dir := range []string{"config/default"} { // config/prometheus: see TestServiceMonitorWithAndWithoutCRD
		t.Run(dir, func(t *testing.T) {
			out := run(t, nil, kubectl(), "kustomize", dir)
			report := dryRunApply(t, kc, out)
			t.Logf("%s:\n%s", dir, report)
			if dir == "config/default" {
				for _, want := range []string{
					"customresourcedefinition.apiextensions.k8s.io/brokers.warrenmq.io serverside-applied",
					"deployment.apps/warren-operator serverside-applied",
					"clusterrole.rbac.authorization.k8s.io/warren-operator serverside-applied",
					"role.rbac.authorization.k8s.io/warren-operator-leader-election serverside-applied",
				} {
					if !strings.Contains(report, want) {
						t.Errorf("kubectl apply did not report %q", want)
					}
				}
			}
		})
	}

	// The sample applies for real, and the operator builds its cluster.
	ns := newNamespace(t)
	sample := run(t, nil, kubectl(), "kustomize", "config/samples")
	run(t, sample, kubectl(), "--kubeconfig", kc, "-n", ns, "apply", "--server-side", "-f", "-")
	b := &warrenv1.Broker{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "warren"}}
	sts := statefulSetOf(t, b)
	if *sts.Spec.Replicas != 3 {
		t.Errorf("sample StatefulSet has %d replicas", *sts.Spec.Replicas)
	}
	if err := getObj(b); err != nil {
		t.Fatal(err)
	}
	if len(b.Spec.Vhosts) != 2 || *b.Spec.Vhosts[0].Storage.QueueVersion == *b.Spec.Vhosts[1].Storage.QueueVersion {
		t.Errorf("sample vhosts %+v: want two with different policies", b.Spec.Vhosts)
	}
	// kubectl shows the printer columns, and the short name works.
	table := string(run(t, nil, kubectl(), "--kubeconfig", kc, "-n", ns, "get", "wb"))
	if !strings.Contains(table, "REPLICAS") || !strings.Contains(table, "warren") {
		t.Errorf("kubectl get wb:\n%s", table)
	}
}

func TestHelmChart(t *testing.T) {
	helm := helmBinary(t)
	kc := kubeconfig(t)
	chart := filepath.Join(repoRoot, "charts", "warren-operator")
	run(t, nil, helm, "lint", "--strict", chart)

	// The chart's CRD is the generated one.
	gen, _ := os.ReadFile(filepath.Join(repoRoot, "config", "crd", "bases", "warrenmq.io_brokers.yaml"))
	inChart, _ := os.ReadFile(filepath.Join(chart, "crds", "warrenmq.io_brokers.yaml"))
	if !bytes.Equal(gen, inChart) {
		t.Error("charts/warren-operator/crds differs from config/crd/bases: run make manifests")
	}

	cases := []struct { // with serviceMonitor.enabled: see TestServiceMonitorWithAndWithoutCRD
		name string
		args []string
		want []string
	}{
		{"defaults", nil, []string{"deployment.apps/wo-warren-operator", "clusterrolebinding.rbac.authorization.k8s.io/wo-warren-operator"}},
		{"watch namespaces", []string{"--set", "watchNamespaces={team-a,team-b}", "--set", "replicaCount=2"},
			[]string{"rolebinding.rbac.authorization.k8s.io/wo-warren-operator"}},
	}
	ensureNamespace(t, "operators")
	ensureNamespace(t, "team-a")
	ensureNamespace(t, "team-b")
	for _, tc := range cases {
		t.Run("template "+tc.name, func(t *testing.T) {
			args := append([]string{"template", "wo", chart, "--namespace", "operators", "--include-crds"}, tc.args...)
			rendered := run(t, nil, helm, args...)
			report := dryRunApply(t, kc, rendered)
			for _, w := range tc.want {
				if !strings.Contains(report, w) {
					t.Errorf("dry-run apply did not report %s:\n%s", w, report)
				}
			}
		})
	}

	// helm install into the test API server creates what it should.
	ensureNamespace(t, "warren-helm")
	run(t, nil, helm, "--kubeconfig", kc, "install", "wh", chart, "--namespace", "warren-helm",
		"--set", "image.tag=test", "--set", "brokerImage=docker.io/warrenmq/warren:test", "--set", "watchNamespaces={team-a}")
	ctx := context.Background()
	dep := &appsv1.Deployment{}
	eventually(t, 10*time.Second, "Deployment", func() error {
		return testClient.Get(ctx, clientKeyOf("warren-helm", "wh-warren-operator"), dep)
	})
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "docker.io/warrenmq/warren-operator:test" || !contains(c.Args, "--leader-elect") ||
		c.LivenessProbe == nil || c.ReadinessProbe == nil || dep.Spec.Template.Spec.ServiceAccountName != "wh-warren-operator" {
		t.Errorf("Deployment container %+v", c)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["WATCH_NAMESPACES"] != "team-a" || env["WARREN_BROKER_IMAGE"] != "docker.io/warrenmq/warren:test" {
		t.Errorf("env %v", env)
	}
	role := &rbacv1.ClusterRole{}
	if err := testClient.Get(ctx, clientKeyOf("", "wh-warren-operator"), role); err != nil {
		t.Fatal(err)
	}
	var generated rbacv1.ClusterRole
	data, _ := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "role.yaml"))
	if err := yaml.Unmarshal(data, &generated); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(role.Rules) != fmt.Sprint(generated.Rules) {
		t.Errorf("chart ClusterRole rules differ from the generated ones:\n%v\n%v", role.Rules, generated.Rules)
	}
	for _, obj := range []struct {
		ns, name string
		into     interface{ GetName() string }
	}{
		{"team-a", "wh-warren-operator", &rbacv1.RoleBinding{}},
		{"warren-helm", "wh-warren-operator-leader-election", &rbacv1.Role{}},
		{"warren-helm", "wh-warren-operator", &corev1.ServiceAccount{}},
		{"warren-helm", "wh-warren-operator-metrics", &corev1.Service{}},
	} {
		if err := testClient.Get(ctx, clientKeyOf(obj.ns, obj.name), obj.into.(clientObject)); err != nil {
			t.Errorf("%T %s/%s: %v", obj.into, obj.ns, obj.name, err)
		}
	}
	status := string(run(t, nil, helm, "--kubeconfig", kc, "status", "wh", "--namespace", "warren-helm"))
	if !strings.Contains(status, "STATUS: deployed") {
		t.Errorf("helm status:\n%s", status)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
