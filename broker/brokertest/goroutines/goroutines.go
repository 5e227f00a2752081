// Package goroutines counts the goroutines a test started, for tests that
// bound them (a pool of openers, no goroutine per call): the test's own
// goroutine is labelled, every goroutine it starts (and those start)
// inherits the label, so Count sees the test's goroutines only, not those
// other tests of the package left running or start late, which
// runtime.NumGoroutine counts too.
package goroutines

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
)

// Mark is the label of one test's goroutines.
type Mark string

// Label labels the test's goroutine and what it starts from now on (until
// the test ends).
func Label(t *testing.T) Mark {
	m := Mark(fmt.Sprintf("%s/%p", t.Name(), t))
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(labelKey, string(m))))
	t.Cleanup(func() { pprof.SetGoroutineLabels(context.Background()) })
	return m
}

const labelKey = "warren-test"

// Count is how many goroutines carry the mark, and their stacks.
func (m Mark) Count() (int, string) {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return -1, err.Error()
	}
	label := fmt.Sprintf("# labels: {%q:%q}", labelKey, string(m))
	n, stacks := 0, ""
	_, groups, _ := strings.Cut(b.String(), "\n") // after "goroutine profile: total N"
	for _, group := range strings.Split(groups, "\n\n") {
		if !strings.Contains(group, label+"\n") {
			continue
		}
		head, _, _ := strings.Cut(group, " @ ")
		k, err := strconv.Atoi(strings.TrimSpace(head))
		if err != nil {
			return -1, "undecodable goroutine profile group: " + group
		}
		n += k
		stacks += group + "\n\n"
	}
	return n, stacks
}
