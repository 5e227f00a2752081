package procsched

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// threadStat returns one field (numbered as in proc(5)) of every thread's
// /proc/self/task/TID/stat: what ps and top show, a different path from
// Apply's sched_getattr.
func threadStat(t *testing.T, field int) map[int]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/stat")
		if err != nil {
			continue // exited
		}
		// The command name (field 2) may hold spaces: count from its ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		v, err := strconv.Atoi(fields[field-3])
		if err != nil {
			t.Fatalf("stat of thread %s, field %d: %v", e.Name(), field, err)
		}
		tid, _ := strconv.Atoi(e.Name())
		out[tid] = v
	}
	return out
}

// threadPolicies is every thread's policy (stat field 41).
func threadPolicies(t *testing.T) map[int]int { return threadStat(t, 41) }

// niceOf is every thread's nice value (stat field 19).
func niceOf(t *testing.T) map[int]int { return threadStat(t, 19) }

// newThreads makes the runtime start n more threads: each goroutine
// locks itself to its thread and holds it until release is closed.
func newThreads(n int) (release func()) {
	var started, done sync.WaitGroup
	stop := make(chan struct{})
	for range n {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			started.Done()
			<-stop
		}()
	}
	started.Wait()
	return func() { close(stop); done.Wait() }
}

func TestApplySetsEveryThreadAndNewThreadsInherit(t *testing.T) {
	before := niceOf(t)
	t.Cleanup(func() {
		if err := Apply(Normal); err != nil {
			t.Errorf("back to normal: %v", err)
		}
	})
	for _, tc := range []struct {
		policy Policy
		want   int // SCHED_BATCH 3, SCHED_OTHER 0
	}{
		{Batch, 3},
		{Normal, 0},
		{Batch, 3},
	} {
		if err := Apply(tc.policy); err != nil {
			t.Fatalf("Apply(%s): %v", tc.policy, err)
		}
		for tid, pol := range threadPolicies(t) {
			if pol != tc.want {
				t.Errorf("after Apply(%s): thread %d has policy %d, want %d", tc.policy, tid, pol, tc.want)
			}
		}
		release := newThreads(4)
		for tid, pol := range threadPolicies(t) {
			if pol != tc.want {
				t.Errorf("after Apply(%s), a thread started later: thread %d has policy %d, want %d", tc.policy, tid, pol, tc.want)
			}
		}
		release()
	}
	for tid, n := range niceOf(t) {
		if was, ok := before[tid]; ok && was != n {
			t.Errorf("thread %d: nice %d, was %d", tid, n, was)
		}
	}
}

// TestApplyLeavesOtherPoliciesAlone: a thread someone put under another
// policy on purpose (here SCHED_IDLE, which needs no privilege) keeps it.
func TestApplyLeavesOtherPoliciesAlone(t *testing.T) {
	t.Cleanup(func() {
		if err := Apply(Normal); err != nil {
			t.Errorf("back to normal: %v", err)
		}
	})
	tids := make(chan int)
	applied := make(chan struct{})
	done := make(chan error)
	go func() {
		// The goroutine keeps its thread while the thread is under
		// SCHED_IDLE, and puts it back before it lets go of it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid := unix.Gettid()
		setPolicy := func(policy uint32) error {
			attr, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				return err
			}
			attr.Policy, attr.Flags, attr.Runtime = policy, 0, 0
			return unix.SchedSetAttr(tid, attr, 0)
		}
		if err := setPolicy(unix.SCHED_IDLE); err != nil {
			done <- err
			return
		}
		tids <- tid
		<-applied
		done <- setPolicy(unix.SCHED_NORMAL)
	}()
	var tid int
	select {
	case tid = <-tids:
	case err := <-done:
		t.Fatalf("put a thread under SCHED_IDLE: %v", err)
	}
	if err := Apply(Batch); err != nil {
		t.Fatal(err)
	}
	pols := threadPolicies(t)
	close(applied)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := pols[tid]; got != unix.SCHED_IDLE {
		t.Errorf("thread under SCHED_IDLE: policy %d after Apply(batch), want %d (left alone)", got, unix.SCHED_IDLE)
	}
	for other, pol := range pols {
		if other != tid && pol != unix.SCHED_BATCH {
			t.Errorf("thread %d: policy %d, want %d", other, pol, unix.SCHED_BATCH)
		}
	}
}
