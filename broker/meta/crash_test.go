package meta

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const crashDirEnv = "WARREN_META_CRASH_DIR"

// crashChild writes queues until killed, printing the index of each write
// once it returned (is acknowledged).
func crashChild(dir string) {
	ctx := context.Background()
	l, err := OpenLocal(ctx, dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	l.compactBytes = 8 << 10 // compact often, so kills also land mid-compaction
	if err := l.PutVhost(ctx, Vhost{Name: "/"}); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	for i := 0; i < 1_000_000; i++ {
		if err := l.PutQueue(ctx, Queue{Vhost: "/", Name: fmt.Sprintf("q%d", i), Durable: true}); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("ack", i)
	}
	os.Exit(0)
}

func TestCrashKill9KeepsAcknowledgedWrites(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9KeepsAcknowledgedWrites$")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		acked := map[int]bool{}
		sc := bufio.NewScanner(out)
		deadline := time.Now().Add(10 * time.Second)
		target := 150 + round*97
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatalf("child: %s", line)
			}
			if n, ok := strings.CutPrefix(line, "ack "); ok {
				i, err := strconv.Atoi(n)
				must(t, err)
				acked[i] = true
			}
			if len(acked) >= target || time.Now().After(deadline) {
				break
			}
		}
		must(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		// Lines the child printed after we stopped reading are acknowledged too.
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				if i, err := strconv.Atoi(n); err == nil {
					acked[i] = true
				}
			}
		}
		if len(acked) == 0 {
			t.Fatal("child acknowledged nothing")
		}

		l, err := OpenLocal(context.Background(), dir)
		must(t, err)
		have := map[string]bool{}
		for _, q := range l.Queues("/") {
			have[q.Name] = true
		}
		for i := range acked {
			if !have[fmt.Sprintf("q%d", i)] {
				t.Fatalf("round %d: acknowledged write q%d lost after kill -9 (%d acked, %d present)", round, i, len(acked), len(have))
			}
		}
		must(t, l.Close())
	}
}
