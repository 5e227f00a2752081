package brokertest

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// StartProcess runs `bin serve --data-dir dataDir` with each of sets as a
// --set key=value, returns once the node has logged that it started (at
// most 60 s), and kills it when the test ends. With -v its log goes to
// the test's.
func StartProcess(t testing.TB, bin, dataDir string, sets ...string) *exec.Cmd {
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
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start warren: %v", err)
	}
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "warren started") {
				once.Do(func() { close(started) })
			}
			if testing.Verbose() {
				t.Log(sc.Text())
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("warren did not start")
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}
