package eventually

import (
	"errors"
	"testing"
	"time"
)

func TestSucceedsRetriesUntilNil(t *testing.T) {
	n := 0
	Succeeds(t, time.Second, "third call", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("check ran %d times, want 3", n)
	}
}

func TestTrueAndHolds(t *testing.T) {
	start := time.Now()
	True(t, time.Second, "50ms passed", func() bool { return time.Since(start) > 50*time.Millisecond })
	Holds(t, 30*time.Millisecond, "still nil", func() error { return nil })
}
