package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The pause binary stays up until SIGTERM or SIGINT and then exits 0.
func TestPauseExitsOnSignal(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Fatalf("pause exited before any signal: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		// A child's exit (SIGCHLD) does not stop it.
		if err := cmd.Process.Signal(syscall.SIGCHLD); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("pause exited on SIGCHLD: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("pause after %v: %v, want exit 0", sig, err)
			}
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("pause did not exit on %v", sig)
		}
	}
	_ = os.Remove(bin)
}
