package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string // "" for success, else part of the error
	}{
		{"lookup localhost", []string{"lookup", "localhost"}, ""},
		{"write", []string{"write", filepath.Join(dir, "probe")}, ""},
		{"write to a missing directory", []string{"write", filepath.Join(dir, "no", "probe")}, "write"},
		{"no DNS server there", []string{"lookup", "-server", "127.0.0.1:1", "-timeout", "1s", "kubernetes.default.svc.cluster.local"}, "lookup kubernetes.default"},
		{"lookup without a name", []string{"lookup"}, "exactly one NAME"},
		{"unknown command", []string{"ping"}, "unknown command"},
		{"no command", nil, "usage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("run(%q): %v", tc.args, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
		})
	}
	b, err := os.ReadFile(filepath.Join(dir, "probe"))
	if err != nil || !strings.HasPrefix(string(b), "written by uid ") {
		t.Fatalf("probe file: %q, %v", b, err)
	}
}

func TestServeConnect(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, []string{"-listen", "127.0.0.1:0"}, ready) }()
	addr := <-ready
	for i := 0; i < 3; i++ {
		if err := run([]string{"connect", addr.String()}); err != nil {
			t.Fatalf("connect %d: %v", i, err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	// Nothing listens there any more.
	if err := run([]string{"connect", "-timeout", "1s", addr.String()}); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("connect after stop = %v, want an error", err)
	}
}
