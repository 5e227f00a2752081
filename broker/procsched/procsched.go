package procsched

import (
	"errors"
	"fmt"
)

// Policy is a scheduling policy for the normal (non-real-time) class.
type Policy string

const (
	// Normal is SCHED_OTHER, the kernel's default.
	Normal Policy = "normal"
	// Batch is SCHED_BATCH: no preemption on wake-up.
	Batch Policy = "batch"
)

// ErrUnsupported is returned where the system has no per-thread scheduling
// policies (any OS but Linux).
var ErrUnsupported = errors.New("procsched: scheduling policies are not supported on this system")

// ParsePolicy returns the Policy named s.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Normal, Batch:
		return p, nil
	}
	return "", fmt.Errorf("procsched: unknown scheduling policy %q (want normal or batch)", s)
}
