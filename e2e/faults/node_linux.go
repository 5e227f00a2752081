//go:build linux

package faults

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The ports every node listens on, on its own address (each node has its
// own network namespace, so they are the same on every node).
const (
	AMQPPort       = 5672
	StreamPort     = 5552
	HTTPPort       = 15672
	PrometheusPort = 15692
	ClusterPort    = 25672
)

// StartTimeout bounds how long a node may take to log "warren started".
const StartTimeout = 60 * time.Second

// Node is one warren process in its own network namespace.
type Node struct {
	Name    string     // n1, n2, ...: also the suffix of its namespace
	IP      netip.Addr // its address on the run's bridge
	Netns   string     // its network namespace (ip netns exec Netns ...)
	DataDir string     // kept across Kill9 and Restart
	LogPath string     // its stderr and stdout, every start appended

	hostVeth string // the host end of its veth (on the bridge)
	nsVeth   string // its end, inside Netns
	bin      string
	settings []string
	secret   string // the run's cluster join secret (ClusterSettings)

	mu      sync.Mutex
	proc    *os.Process
	exited  chan struct{} // closed when proc has been reaped
	started chan struct{} // closed when proc logged "warren started"
}

// AMQPAddr is host:port of the node's AMQP listener.
func (n *Node) AMQPAddr() string { return n.addr(AMQPPort) }

// AMQPURL is the node's AMQP URL as guest on the default vhost.
func (n *Node) AMQPURL() string { return "amqp://guest:guest@" + n.AMQPAddr() + "/" }

// HTTPURL is the base URL of the node's management API.
func (n *Node) HTTPURL() string { return "http://" + n.addr(HTTPPort) }

// StreamAddr is host:port of the node's stream protocol listener.
func (n *Node) StreamAddr() string { return n.addr(StreamPort) }

// ClusterAddr is host:port of the node's cluster listener.
func (n *Node) ClusterAddr() string { return n.addr(ClusterPort) }

func (n *Node) addr(port int) string { return net.JoinHostPort(n.IP.String(), strconv.Itoa(port)) }

// Pid is the pid of the node's warren process, 0 when it is not running.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return 0
	}
	return n.proc.Pid
}

// args is the node's command line: ip netns exec, which execs warren in the
// namespace (the pid is warren's own, so signals reach it directly).
func (n *Node) args() []string {
	args := []string{"netns", "exec", n.Netns, n.bin, "serve", "--data-dir", n.DataDir}
	for _, s := range n.settings {
		args = append(args, "--set", s)
	}
	return args
}

// start runs the node and returns once it has logged that it started, or an
// error with the tail of its log if it exits or does not start in time.
func (n *Node) start() error {
	if err := n.spawn(); err != nil {
		return err
	}
	return n.waitStarted(StartTimeout)
}

// spawn runs the node's process and returns at once.
func (n *Node) spawn() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		select {
		case <-n.exited: // it exited on its own: start it again
		default:
			return fmt.Errorf("node %s: already running (pid %d)", n.Name, n.proc.Pid)
		}
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "--- %s: start %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(n.args(), " "))
	r, w, err := os.Pipe()
	if err != nil {
		logf.Close()
		return err
	}
	cmd := exec.Command("ip", n.args()...)
	cmd.Stdout, cmd.Stderr = w, w
	// Killed with the test process, should it die without its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		r.Close()
		w.Close()
		return fmt.Errorf("node %s: start: %w", n.Name, err)
	}
	w.Close()
	started := make(chan struct{})
	go func() {
		defer logf.Close()
		defer r.Close()
		var once sync.Once
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if strings.Contains(sc.Text(), "warren started") {
				once.Do(func() { close(started) })
			}
		}
	}()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	n.proc, n.exited, n.started = cmd.Process, exited, started
	return nil
}

// waitStarted waits until the node's process logged "warren started"; it
// returns an error with the tail of its log if the process exits first or
// does not start within timeout (then it is killed).
func (n *Node) waitStarted(timeout time.Duration) error {
	n.mu.Lock()
	proc, exited, started := n.proc, n.exited, n.started
	n.mu.Unlock()
	if proc == nil {
		return fmt.Errorf("node %s is not running", n.Name)
	}
	select {
	case <-started:
		return nil
	case <-exited:
		n.mu.Lock()
		n.proc = nil
		n.mu.Unlock()
		return fmt.Errorf("node %s exited while starting; log:\n%s", n.Name, n.logTail(30))
	case <-time.After(timeout):
		_ = proc.Kill()
		<-exited
		n.mu.Lock()
		n.proc = nil
		n.mu.Unlock()
		return fmt.Errorf("node %s did not start within %v; log:\n%s", n.Name, timeout, n.logTail(30))
	}
}

// signal sends sig to the node's process.
func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return fmt.Errorf("node %s is not running", n.Name)
	}
	if err := n.proc.Signal(sig); err != nil {
		return fmt.Errorf("node %s: %v: %w", n.Name, sig, err)
	}
	return nil
}

// stop sends sig (SIGKILL or SIGTERM) and waits until the process is reaped,
// at most wait; after that it kills it.
func (n *Node) stop(sig syscall.Signal, wait time.Duration) error {
	n.mu.Lock()
	proc, exited := n.proc, n.exited
	n.mu.Unlock()
	if proc == nil {
		return nil
	}
	_ = proc.Signal(sig)
	if sig != syscall.SIGKILL {
		_ = proc.Signal(syscall.SIGCONT) // a paused node cannot act on SIGTERM
	}
	var err error
	select {
	case <-exited:
	case <-time.After(wait):
		err = fmt.Errorf("node %s did not exit within %v of %v; killed", n.Name, wait, sig)
		_ = proc.Kill()
		<-exited
	}
	n.mu.Lock()
	n.proc = nil
	n.mu.Unlock()
	return err
}

// logTail returns the last lines of the node's log.
func (n *Node) logTail(lines int) string {
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// running reports whether the node's process is running (it may be paused).
func (n *Node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}
