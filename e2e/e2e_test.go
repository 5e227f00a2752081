//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

const (
	// operatorNamespace is where the Helm release of the operator goes.
	operatorNamespace = "warren-system"
	releaseName       = "warren-operator"
	// testNamespace holds the Broker and the client Jobs.
	testNamespace = "warren-e2e"
)

var (
	k        *cluster
	registry = envOr("E2E_IMAGE_REGISTRY", "docker.io/warrenmq")
	tag      = envOr("E2E_IMAGE_TAG", "dev")
)

// image is the fully qualified name of one of the project's images.
func image(name string) string { return registry + "/" + name + ":" + tag }

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if k, err = newCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	start := time.Now()
	if err := installOperator(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		k.dump(os.Stdout, operatorNamespace)
		return 1
	}
	fmt.Printf("e2e: operator installed with Helm in %s\n", time.Since(start).Round(time.Second))
	code := m.Run()
	if code != 0 {
		fmt.Println("e2e: FAILED; what the cluster shows:")
		k.dump(os.Stdout, testNamespace, operatorNamespace)
	}
	if os.Getenv("E2E_KEEP") == "" {
		uninstall()
	}
	return code
}

// installOperator installs the chart with the images under test (pulled
// only if not present: they were loaded into the cluster), replacing a
// previous release, and recreates the test namespace.
func installOperator() error {
	helm := os.Getenv("E2E_HELM")
	if helm == "" {
		return errors.New("E2E_HELM is not set (make e2e sets it to the pinned helm of make helm-path)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	chart, err := filepath.Abs("../charts/warren-operator")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, helm, "upgrade", "--install", releaseName, chart,
		"--namespace", operatorNamespace, "--create-namespace",
		"--set", "image.repository="+registry+"/warren-operator",
		"--set", "image.tag="+tag,
		"--set", "image.pullPolicy=IfNotPresent",
		"--set", "brokerImage="+image("warren"),
		"--set", "logLevel=debug",
		"--wait", "--timeout", "5m")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fmt.Println("e2e:", cmd.String())
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("helm install: %w", err)
	}
	// After the operator is up: a Broker left by a previous run holds its
	// namespace until the operator releases its finalizer.
	return recreateNamespace(ctx, testNamespace)
}

// recreateNamespace deletes ns if a previous run left it, waits until it is
// gone, and creates it.
func recreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k.c.Delete(ctx, ns); err == nil {
		fmt.Printf("e2e: deleting namespace %s left by a previous run\n", name)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	for {
		err := k.c.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("namespace %s still there: %w", name, ctx.Err())
		}
		time.Sleep(2 * time.Second)
	}
	if err := k.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// uninstall removes what the suite made (the Helm release, the namespaces;
// the CRD stays, as Helm leaves CRDs). Brokers left by a failed test are
// deleted while the operator still runs to release their finalizers.
func uninstall() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_ = k.c.DeleteAllOf(ctx, &warrenv1.Broker{}, client.InNamespace(testNamespace))
	for i := 0; i < 60; i++ {
		left := &warrenv1.BrokerList{}
		if err := k.c.List(ctx, left, client.InNamespace(testNamespace)); err != nil || len(left.Items) == 0 {
			break
		}
		time.Sleep(2 * time.Second)
	}
	_ = k.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}})
	cmd := exec.CommandContext(ctx, os.Getenv("E2E_HELM"), "uninstall", releaseName, "--namespace", operatorNamespace, "--wait", "--timeout", "2m")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: helm uninstall:", err)
	}
	_ = k.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})
}
