package forward

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
)

// goroutineMark labels the calling test's goroutine so that every
// goroutine it starts, and every one those start, carries the label
// (goroutine labels are inherited): count then sees this test's goroutines
// only, not those other tests of the package left running or start late,
// which runtime.NumGoroutine counts too.
type goroutineMark string

// markGoroutines labels the test's goroutine and what it starts from now on.
func markGoroutines(t *testing.T) goroutineMark {
	m := goroutineMark(fmt.Sprintf("%s/%p", t.Name(), t))
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("forward-test", string(m))))
	t.Cleanup(func() { pprof.SetGoroutineLabels(context.Background()) })
	return m
}

// count is how many goroutines carry the mark, and their stacks.
func (m goroutineMark) count() (int, string) {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return -1, err.Error()
	}
	label := fmt.Sprintf("# labels: {%q:%q}", "forward-test", string(m))
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
