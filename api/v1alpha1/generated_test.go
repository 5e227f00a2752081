package v1alpha1

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The checked-in CRD and RBAC are what controller-gen makes of the current
// markers: a change to the types or the controller's RBAC markers without
// `make manifests` fails here.
func TestManifestsUpToDate(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "make", "-C", root, "--no-print-directory", "-s", "controller-gen-path").Output()
	if err != nil {
		t.Fatalf("make controller-gen-path: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	cg := lines[len(lines)-1]
	tmp := t.TempDir()
	gen := exec.CommandContext(ctx, cg, "crd", "rbac:roleName=warren-operator", "paths=./api/...", "paths=./controllers/...",
		"output:crd:dir="+filepath.Join(tmp, "crd"), "output:rbac:dir="+filepath.Join(tmp, "rbac"))
	gen.Dir = root
	if msg, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, msg)
	}
	for gotPath, wantPath := range map[string]string{
		filepath.Join(tmp, "crd", "warrenmq.io_brokers.yaml"): filepath.Join(root, "config", "crd", "bases", "warrenmq.io_brokers.yaml"),
		filepath.Join(tmp, "rbac", "role.yaml"):               filepath.Join(root, "config", "rbac", "role.yaml"),
	} {
		got, err := os.ReadFile(gotPath)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(wantPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what controller-gen generates: run make manifests", wantPath)
		}
	}
}
