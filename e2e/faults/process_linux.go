//go:build linux

package faults

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Kill9 kills node n with SIGKILL (no shutdown, nothing flushed) and waits
// until it is gone. Its data directory stays for Restart.
func (c *Cluster) Kill9(n *Node) {
	c.t.Helper()
	if !n.running() {
		c.fatalf("Kill9 %s: not running", n.Name)
	}
	if err := n.stop(syscall.SIGKILL, 10*time.Second); err != nil {
		c.fatalf("Kill9: %v", err)
	}
}

// Stop stops node n gracefully (SIGTERM, as Kubernetes does; at most 30 s,
// then SIGKILL) and waits until it is gone.
func (c *Cluster) Stop(n *Node) {
	c.t.Helper()
	if err := n.stop(syscall.SIGTERM, 30*time.Second); err != nil {
		c.fatalf("Stop: %v", err)
	}
}

// Restart starts node n again, with the same data directory and settings,
// and returns once it has started. It must have been stopped (Kill9, Stop)
// or have exited on its own.
func (c *Cluster) Restart(n *Node) {
	c.t.Helper()
	if err := n.start(); err != nil {
		c.fatalf("Restart: %v", err)
	}
}

// Pause stops node n's process with SIGSTOP: its sockets stay open and the
// kernel still accepts connections into the listen backlog, but nothing is
// read, answered or written (a process stalled by GC, swap or a hung disk).
func (c *Cluster) Pause(n *Node) {
	c.t.Helper()
	if err := n.signal(syscall.SIGSTOP); err != nil {
		c.fatalf("Pause: %v", err)
	}
}

// Resume continues a paused node (SIGCONT).
func (c *Cluster) Resume(n *Node) {
	c.t.Helper()
	if err := n.signal(syscall.SIGCONT); err != nil {
		c.fatalf("Resume: %v", err)
	}
}

// build compiles cmd/warren into dir.
func build(dir string) (string, error) {
	bin := filepath.Join(dir, "warren")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/warrenmq/warren/cmd/warren")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build warren: %w\n%s", err, out)
	}
	return bin, nil
}
