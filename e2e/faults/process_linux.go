//go:build linux

package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// Spawn starts node n again like Restart but returns at once, without
// waiting for it to start (a node that waits to be let into its cluster);
// WaitStarted waits for it.
func (c *Cluster) Spawn(n *Node) {
	c.t.Helper()
	if err := n.spawn(); err != nil {
		c.fatalf("Spawn: %v", err)
	}
}

// WaitStarted returns once node n (Spawn) has started; it fails the test if
// it exits or has not started within timeout.
func (c *Cluster) WaitStarted(n *Node, timeout time.Duration) {
	c.t.Helper()
	if err := n.waitStarted(timeout); err != nil {
		c.fatalf("WaitStarted: %v", err)
	}
}

// Started reports whether node n's current process has logged that it
// started.
func (c *Cluster) Started(n *Node) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started == nil {
		return false
	}
	select {
	case <-n.started:
		return true
	default:
		return false
	}
}

// Wipe removes stopped node n's data directory and makes it again empty:
// a replaced disk. The node keeps its name and address.
func (c *Cluster) Wipe(n *Node) {
	c.t.Helper()
	if n.running() {
		c.fatalf("Wipe %s: still running", n.Name)
	}
	if err := os.RemoveAll(n.DataDir); err != nil {
		c.fatalf("Wipe %s: %v", n.Name, err)
	}
	if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
		c.fatalf("Wipe %s: %v", n.Name, err)
	}
}

// LogContains reports whether node n's log (every start of it) has a line
// containing s.
func (c *Cluster) LogContains(n *Node, s string) bool {
	b, err := os.ReadFile(n.LogPath)
	return err == nil && strings.Contains(string(b), s)
}
