package procsched

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxPasses bounds Apply's passes over the process's threads: a thread
// created during a pass by one not yet changed is found by the next.
const maxPasses = 8

func (p Policy) number() (uint32, error) {
	switch p {
	case Normal:
		return unix.SCHED_NORMAL, nil
	case Batch:
		return unix.SCHED_BATCH, nil
	}
	return 0, fmt.Errorf("procsched: unknown scheduling policy %q", string(p))
}

// Apply sets policy p on every thread of the process that runs under one
// of the normal policies (normal or batch), keeping each thread's nice
// value. Threads under any other policy (real-time, idle, deadline: set on
// purpose, for example by starting the broker under chrt) are left as
// they are.
func Apply(p Policy) error {
	want, err := p.number()
	if err != nil {
		return err
	}
	for range maxPasses {
		changed, err := applyPass(want)
		if err != nil {
			return err
		}
		if changed == 0 {
			return nil
		}
	}
	return fmt.Errorf("procsched: threads kept appearing with another policy after %d passes", maxPasses)
}

// normalClass reports whether policy is SCHED_OTHER or SCHED_BATCH.
func normalClass(policy uint32) bool {
	return policy == unix.SCHED_NORMAL || policy == unix.SCHED_BATCH
}

// applyPass sets the policy on the threads that do not have it yet and
// returns how many it changed.
func applyPass(want uint32) (int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, fmt.Errorf("procsched: list threads: %w", err)
	}
	changed := 0
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // the thread exited
		}
		if err != nil {
			return changed, fmt.Errorf("procsched: read thread %d's policy: %w", tid, err)
		}
		if attr.Policy == want || !normalClass(attr.Policy) {
			continue // done, or a policy someone chose on purpose (chrt -f, -i, ...)
		}
		// The nice value is kept (raising a thread's priority would need
		// privilege); a requested slice (Runtime, for the normal class)
		// goes back to the kernel's default.
		attr.Policy = want
		attr.Priority = 0
		attr.Flags = 0
		attr.Runtime = 0
		err = unix.SchedSetAttr(tid, attr, 0)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			return changed, fmt.Errorf("procsched: set thread %d's policy: %w", tid, err)
		}
		changed++
	}
	return changed, nil
}
