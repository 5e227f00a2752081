// Package eventually is the one polling helper of the repository's tests: it
// retries a check until it passes or a deadline goes by. It imports nothing of
// Warren's, so tests of any package (store, queue, amqp, ...) can use it
// without an import cycle through brokertest.
package eventually

import (
	"testing"
	"time"
)

// Interval is how often a check is retried.
const Interval = 10 * time.Millisecond

// Succeeds calls check until it returns nil; if timeout passes first, the test
// fails with what and the check's last error.
func Succeeds(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(Interval)
	}
}

// True is Succeeds for a condition without an error to report.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Succeeds(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// Within is True for goroutines other than the test's (where t.Fatal
// must not be called): it reports whether cond held within timeout, and
// the caller reports a failure with t.Error.
func Within(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(Interval) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// Holds calls check until d has passed and fails the test the first time it
// returns an error (the counterpart of Succeeds: something that must stay so).
func Holds(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(Interval) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

type notYet struct{}

func (notYet) Error() string { return "condition not met" }

var errNotYet error = notYet{}
