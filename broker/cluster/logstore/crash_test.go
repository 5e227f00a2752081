package logstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const crashDirEnv = "WARREN_LOGSTORE_CRASH_DIR"

const crashGroups = 8

// crashChild appends to crashGroups groups concurrently with StoreLogs
// until killed, printing "ack <group> <index>" once each call returned.
// It continues where the store's log ends, so rounds build on each other.
func crashChild(dir string) {
	s, err := Open(context.Background(), dir, Options{SegmentBytes: 8 << 10})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	// An idle group: three entries once, never compacted, so segments
	// only go once its entries were copied forward.
	if idle := s.Group("idle"); true {
		if last, _ := idle.LastIndex(); last == 0 {
			if err := idle.StoreLogs(entries("idle", 1, 3, 1)); err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
		}
	}
	fmt.Println("idle written")
	var out sync.Mutex
	var wg sync.WaitGroup
	for gi := range crashGroups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("g%d", gi)
			g := s.Group(id)
			last, _ := g.LastIndex()
			for i := last + 1; ; i += 3 {
				if err := g.StoreLogs(entries(id, i, i+2, 1)); err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				if i > 60 && i%30 < 3 { // compact as raft would, so segments go
					out.Lock()
					fmt.Println("compact", id, i-50) // before: the parent knows every deletion possible
					out.Unlock()
					if err := g.DeleteRange(1, i-50); err != nil {
						fmt.Println("error", err)
						os.Exit(2)
					}
				}
				out.Lock()
				fmt.Println("ack", id, i+2)
				out.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestCrashKill9KeepsAcknowledgedAppends(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9KeepsAcknowledgedAppends$")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		acked := map[string]uint64{}     // group -> highest acknowledged index
		compacted := map[string]uint64{} // group -> highest index it may have deleted
		read := func(line string) {
			if strings.HasPrefix(line, "error") {
				t.Fatalf("child: %s", line)
			}
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "ack" {
				i, err := strconv.ParseUint(f[2], 10, 64)
				must(t, err)
				acked[f[1]] = max(acked[f[1]], i)
			}
			if len(f) == 3 && f[0] == "compact" {
				i, err := strconv.ParseUint(f[2], 10, 64)
				must(t, err)
				compacted[f[1]] = max(compacted[f[1]], i)
			}
		}
		sc := bufio.NewScanner(out)
		deadline := time.Now().Add(10 * time.Second)
		n, target := 0, 300+round*157
		for sc.Scan() {
			read(sc.Text())
			if n++; n >= target || time.Now().After(deadline) {
				break
			}
		}
		must(t, cmd.Process.Signal(syscall.SIGKILL))
		for sc.Scan() { // printed before the kill: acknowledged too
			read(sc.Text())
		}
		_ = cmd.Wait()
		if len(acked) == 0 {
			t.Fatal("child acknowledged nothing")
		}
		s, err := Open(context.Background(), dir, Options{SegmentBytes: 8 << 10})
		must(t, err)
		checkLog(t, s, "idle", 1, 3)
		t.Logf("round %d: %d segments", round, len(segments(t, dir)))
		if n := len(segments(t, dir)); n > 12 {
			t.Fatalf("round %d: %d segments of 8 KiB: compacted ones are kept", round, n)
		}
		for id, want := range acked {
			g := s.Group(id)
			last, err := g.LastIndex()
			must(t, err)
			if last < want {
				t.Fatalf("round %d: group %s: acknowledged index %d lost after kill -9 (last is %d)", round, id, want, last)
			}
			first, err := g.FirstIndex()
			must(t, err)
			if first > compacted[id]+1 {
				t.Fatalf("round %d: group %s: entries before %d lost after kill -9 (only up to %d were deleted)", round, id, first, compacted[id])
			}
			checkLog(t, s, id, first, last)
		}
		must(t, s.Close())
	}
}
