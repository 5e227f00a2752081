package gctune

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		growth, scanned uint64
		base, want      int
	}{
		{64 << 20, 8 << 20, 100, 800},        // small heap: the growth decides
		{64 << 20, 64 << 20, 100, 100},       // the growth is the percentage's
		{64 << 20, 512 << 20, 100, 100},      // large heap: Go's percentage
		{64 << 20, 512 << 20, 200, 200},      // GOGC=200 is the base
		{64 << 20, 100 << 20, 50, 64},        // GOGC=50 is the floor
		{64 << 20, 200 << 20, 0, 32},         // GOGC=0 still gets the growth
		{64 << 20, 5 << 20, 100, 1280},       // 5 MiB scanned
		{64 << 20, 33 << 20, 100, 194},       // rounded up
		{64 << 20, (64 << 20) - 1, 100, 101}, // a byte under: rounded up
		{64 << 20, 1 << 20, 100, 1600},       // below Go's 4 MiB minimum: as 4 MiB
		{64 << 20, 0, 100, 1600},             // nothing measured yet: as 4 MiB
		{1 << 30, 0, 100, 25600},             // the minimum scaled stays the growth
		{1, 1 << 30, 100, 100},               // no growth worth the name
		{64 << 20, 1 << 20, 200000, 200000},  // a base above all stays
	} {
		t.Run(fmt.Sprintf("%d/%d/%d", tc.growth, tc.scanned, tc.base), func(t *testing.T) {
			if got := percentFor(tc.growth, tc.scanned, tc.base); got != tc.want {
				t.Fatalf("percentFor(%d, %d, %d) = %d, want %d", tc.growth, tc.scanned, tc.base, got, tc.want)
			}
		})
	}
}

// goal is Go's heap goal and the live heap after the last collection.
func goal() (goal, live uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestTunerSetsTheGoalAfterEachCollection: with the Tuner on, every
// collection leaves the heap goal the growth above the live heap; after
// Stop, Go's percentage is back.
func TestTunerSetsTheGoalAfterEachCollection(t *testing.T) {
	const growth = 256 << 20
	before := debug.SetGCPercent(100) // GOGC of the test's environment
	debug.SetGCPercent(before)
	if before != 100 {
		t.Skipf("GOGC=%d in the environment: the goals below are Go's default's", before)
	}
	tu := Start(growth)
	if tu == nil {
		t.Fatal("Start returned nil with GOGC on")
	}
	t.Cleanup(tu.Stop)
	if g, l := goal(); g > l+2*growth {
		t.Fatalf("after Start: goal %d with %d live; want at most about %d above", g, l, uint64(growth))
	}
	for round := range 3 {
		// Some live heap and some garbage, then a collection.
		live := make([][]byte, 64)
		for i := range live {
			live[i] = make([]byte, 64<<10)
		}
		for range 100 {
			_ = make([]byte, 64<<10)
		}
		runtime.GC()
		eventually.Succeeds(t, 5*time.Second, "heap goal after a collection", func() error {
			g, l := goal()
			if g < l+growth*9/10 || g > l+growth*2 {
				return fmt.Errorf("round %d: goal %d with %d live; want about %d above", round, g, l, uint64(growth))
			}
			return nil
		})
		runtime.KeepAlive(live)
	}
	if p := tu.Percent(); p <= 100 {
		t.Fatalf("percent %d with a small heap", p)
	}
	tu.Stop()
	if p := debug.SetGCPercent(before); p != before {
		t.Fatalf("after Stop the percentage is %d, want %d back", p, before)
	}
	// The sentinel armed before Stop is freed by the next collection; its
	// cleanup must leave the percentage alone.
	ran := tu.cleanups.Load()
	runtime.GC()
	eventually.True(t, 5*time.Second, "the last sentinel's cleanup", func() bool {
		runtime.GC()
		return tu.cleanups.Load() > ran
	})
	if p := debug.SetGCPercent(before); p != before {
		t.Fatalf("a cleanup after Stop set the percentage to %d", p)
	}
	if g, l := goal(); g > 2*l+16<<20 {
		t.Fatalf("after Stop: goal %d with %d live, want Go's own (about twice)", g, l)
	}
}

func TestStartDoesNothingWhenOff(t *testing.T) {
	if tu := Start(0); tu != nil {
		t.Fatal("Start(0) tunes")
	}
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	if tu := Start(64 << 20); tu != nil {
		tu.Stop()
		t.Fatal("Start with GOGC=off tunes")
	}
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("Start with GOGC=off changed the percentage to %d", p)
	}
	var nilTuner *Tuner
	nilTuner.Stop()
}
