package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// The package's tests share one real kube-apiserver and etcd (envtest) and
// one manager running the Broker reconciler; each test works in its own
// namespace. No kubelet or controller manager runs: tests set StatefulSet
// status themselves, and nothing garbage-collects owned children.
var (
	testEnv    *envtest.Environment
	testConfig *rest.Config
	testClient client.Client
	testScheme = runtime.NewScheme()
	// nodeURLs maps namespace/name of a broker pod to the HTTP API of a real
	// warren process a test started for it.
	nodeURLs sync.Map
	repoRoot string
)

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controllers tests:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (int, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return 0, err
	}
	repoRoot = root
	// The reconciler's log (errors included, which some tests provoke) is
	// shown only with WARREN_TEST_LOG=1.
	logger := logr.Discard()
	if os.Getenv("WARREN_TEST_LOG") != "" {
		logger = logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil))
	}
	ctrl.SetLogger(logger)
	assets, err := envtestAssets(root)
	if err != nil {
		return 0, err
	}
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, warrenv1.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(testScheme); err != nil {
			return 0, err
		}
	}
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	testConfig, err = testEnv.Start()
	defer func() { _ = testEnv.Stop() }() // also after a failed start, which may leave etcd running
	if err != nil {
		return 0, fmt.Errorf("start kube-apiserver and etcd from %s: %w", assets, err)
	}
	testClient, err = client.New(testConfig, client.Options{Scheme: testScheme})
	if err != nil {
		return 0, err
	}

	opts := ctrl.Options{
		Scheme:  testScheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
	}
	opts.Cache, opts.Client = CacheOptions(opts.Cache)
	mgr, err := ctrl.NewManager(testConfig, opts)
	if err != nil {
		return 0, err
	}
	r := &BrokerReconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorder("warren-operator"),
		DefaultImage: "docker.io/warrenmq/warren:test",
		NodeURL: func(b *warrenv1.Broker, pod *corev1.Pod) string {
			if u, ok := nodeURLs.Load(pod.Namespace + "/" + pod.Name); ok {
				return u.(string)
			}
			return "http://127.0.0.1:1" // nothing listens
		},
		PolicyResync:  2 * time.Second,
		ClusterResync: time.Second,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		return code, fmt.Errorf("manager: %w", err)
	}
	return code, nil
}

// envtestAssets returns the directory with kube-apiserver, etcd and kubectl:
// $KUBEBUILDER_ASSETS when set, else what hack/setup-envtest.sh builds (from
// the Go module proxy, cached; several minutes the first time). A missing
// script or a failed build is an error, never a skip.
func envtestAssets(root string) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	script := filepath.Join(root, "hack", "setup-envtest.sh")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("KUBEBUILDER_ASSETS is not set and %s is missing: the operator's tests need a kube-apiserver and etcd: %w", script, err)
	}
	fmt.Fprintln(os.Stderr, "controllers tests: KUBEBUILDER_ASSETS not set, running hack/setup-envtest.sh (cached; slow the first time)")
	var out bytes.Buffer
	cmd := exec.Command(script)
	cmd.Dir = root
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/setup-envtest.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return "", fmt.Errorf("hack/setup-envtest.sh printed %q, which has no kube-apiserver: %w", dir, err)
	}
	if err := os.Setenv("KUBEBUILDER_ASSETS", dir); err != nil {
		return "", err
	}
	return dir, nil
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := testClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// eventually retries check until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// consistently checks that check keeps returning nil for d.
func consistently(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getObj reads obj's current state by its namespace and name.
func getObj(obj client.Object) error {
	return testClient.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
}

// eventFor waits for an event about the Broker with the given reason whose
// note contains substr, and returns it.
func eventFor(t *testing.T, b *warrenv1.Broker, reason, substr string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	eventually(t, 20*time.Second, "event "+reason, func() error {
		var list eventsv1.EventList
		if err := testClient.List(context.Background(), &list, client.InNamespace(b.Namespace)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name != b.Name || e.Regarding.Kind != "Broker" {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Note)
			if e.Reason == reason && strings.Contains(e.Note, substr) {
				found = e
				return nil
			}
		}
		return fmt.Errorf("events so far: %q", seen)
	})
	return found
}

var errNotYet = errors.New("not yet")

func clientKey(obj client.Object) client.ObjectKey { return client.ObjectKeyFromObject(obj) }

type clientObject = client.Object

func clientKeyOf(ns, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: name}
}
