package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedUpToDate fails when spec_gen.go was edited by hand or not
// regenerated after a change to the spec or the generator.
func TestGeneratedUpToDate(t *testing.T) {
	// Paths as seen from broker/amqp/wire, where go:generate runs.
	t.Chdir("../..")
	want, err := generate("spec/amqp0-9-1.stripped.extended.xml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("spec_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("spec_gen.go is stale: run `make generate`")
	}
}

func TestCamel(t *testing.T) {
	tests := map[string]string{
		"routing-key": "RoutingKey", "reserved-1": "Reserved1", "no-wait": "NoWait",
		"class-id": "ClassId", "nowait": "Nowait", "global": "Global", "get-ok": "GetOk",
	}
	for in, want := range tests {
		if got := camel(in); got != want {
			t.Errorf("camel(%q) = %q, want %q", in, got, want)
		}
	}
}
