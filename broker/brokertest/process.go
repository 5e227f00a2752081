package brokertest

import (
	"bufio"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildWarren compiles cmd/warren into a temp dir and returns the binary,
// for tests that need a real process (SIGTERM, kill -9).
func BuildWarren(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "warren")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/warrenmq/warren/cmd/warren")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build warren: %v\n%s", err, out)
	}
	return bin
}

// processLogLines is how much of a process's log a failing test shows.
const processLogLines = 40

// processStartTimeout bounds how long a process may take to log that it
// started.
const processStartTimeout = 60 * time.Second

// Process is a warren process run by a test. Its log is kept (the last
// processLogLines lines) and shown when the test fails; with -v every line
// goes to the test's log. Its methods may be called from any goroutine.
type Process struct {
	Cmd *exec.Cmd

	started chan struct{} // closed when the process logged "warren started"
	exited  chan struct{} // closed when the process exited
	waitErr error         // the exit status; set before exited is closed

	mu    sync.Mutex
	tail  []string          // the last processLogLines lines of its log
	addrs map[string]string // listener name to address, from "warren started"
}

// LaunchProcess runs `bin serve --data-dir dataDir` with each of sets as a
// --set key=value and returns at once; WaitStarted waits for it to serve.
// The process is killed when the test ends. A listener set to
// 127.0.0.1:0 gets a port of the kernel's choosing, which Addr reports.
func LaunchProcess(t testing.TB, bin, dataDir string, sets ...string) *Process {
	t.Helper()
	args := []string{"serve", "--data-dir", dataDir}
	// Processes of parallel tests must not share the default cluster port,
	// nor read or make the user's secret file.
	defaults := map[string]string{"cluster.listen": "127.0.0.1:0", "cluster.secret": "warren-test-cluster-secret"}
	for _, s := range sets {
		delete(defaults, strings.SplitN(s, "=", 2)[0])
	}
	for k, v := range defaults {
		args = append(args, "--set", k+"="+v)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	p := &Process{Cmd: exec.Command(bin, args...), started: make(chan struct{}), exited: make(chan struct{})}
	dieWithParent(p.Cmd)
	stderr, err := p.Cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start warren: %v", err)
	}
	go p.read(t, stderr)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("log of warren (pid %d, %s), last lines:\n%s", p.Cmd.Process.Pid, dataDir, p.Log())
		}
	})
	return p
}

// read keeps the process's log until it ends, then waits for the process.
func (p *Process) read(t testing.TB, stderr io.Reader) {
	var once sync.Once
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > processLogLines {
			p.tail = p.tail[len(p.tail)-processLogLines:]
		}
		if strings.Contains(line, "warren started") {
			p.addrs = logAddrs(line)
			once.Do(func() { close(p.started) })
		}
		p.mu.Unlock()
		if testing.Verbose() {
			t.Log(line)
		}
	}
	p.waitErr = p.Cmd.Wait()
	close(p.exited)
}

// logAddrs reads the key=value pairs of a slog text line.
func logAddrs(line string) map[string]string {
	addrs := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			addrs[k] = strings.Trim(v, `"`)
		}
	}
	return addrs
}

// StartProcess is LaunchProcess followed by WaitStarted.
func StartProcess(t testing.TB, bin, dataDir string, sets ...string) *Process {
	t.Helper()
	p := LaunchProcess(t, bin, dataDir, sets...)
	p.WaitStarted(t)
	return p
}

// WaitStarted returns once the process has logged that it started; the
// test fails, with the process's log, if it exits first or takes longer
// than a minute.
func (p *Process) WaitStarted(t testing.TB) {
	t.Helper()
	select {
	case <-p.started:
	case <-p.exited:
		t.Fatalf("warren exited while starting (%v)", p.waitErr)
	case <-time.After(processStartTimeout):
		t.Fatalf("warren did not start within %v", processStartTimeout)
	}
}

// Addr is the address the started process logged for a listener ("amqp",
// "stream", "http", "prometheus"), or "" before it started.
func (p *Process) Addr(listener string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addrs[listener]
}

// Log is the last lines the process logged.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// Signal sends sig to the process, if it still runs.
func (p *Process) Signal(sig syscall.Signal) {
	select {
	case <-p.exited:
	default:
		_ = p.Cmd.Process.Signal(sig)
	}
}

// Kill kills the process with SIGKILL and returns once it has exited.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.exited
}

// Wait returns the process's exit status once it has exited.
func (p *Process) Wait() error {
	<-p.exited
	return p.waitErr
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }
