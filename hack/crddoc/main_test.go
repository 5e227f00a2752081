package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/operator.md's reference must match the generated CRD (make docs-crd).
func TestReferenceUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	err := run(filepath.Join(root, "config", "crd", "bases", "warrenmq.io_brokers.yaml"), filepath.Join(root, "docs", "operator.md"), true)
	if err != nil {
		t.Fatal(err)
	}
}

func TestRenderDocumentsEveryField(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "doc.md")
	if err := os.WriteFile(doc, []byte("# x\n"+startMarker+"\n"+endMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(filepath.Join("..", "..", "config", "crd", "bases", "warrenmq.io_brokers.yaml"), doc, false); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(doc)
	for _, want := range []string{
		"### `spec.vhosts.storage`", "| `queueVersion` | integer (int32) |  | one of `1`, `2` |",
		"replicas must be odd", "unique by name", "### `status`", "| `readyReplicas` |",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("reference lacks %q", want)
		}
	}
	// Every field has a description.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "| `") && strings.HasSuffix(line, "|  |") {
			t.Errorf("undocumented field: %s", line)
		}
	}
}
