package gctune

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Tuner keeps the heap goal at least Growth bytes above the live heap.
// Its methods are safe for concurrent use.
type Tuner struct {
	growth  uint64
	percent int // Go's percentage found at Start (GOGC)

	cleanups atomic.Int64 // sentinel cleanups run (tests wait for one)

	mu      sync.Mutex
	stopped bool
	set     int // the percentage last set
	samples []metrics.Sample
}

// sentinel is freed by every collection: its cleanup sets the next goal
// and makes the next sentinel. It holds a pointer so it is not a tiny
// allocation (those share a block, which another object can keep alive).
type sentinel struct{ _ *byte }

// Start makes a Tuner keep the heap goal at least growth bytes above the
// live heap. It returns nil (nothing to tune) when growth is 0 or GOGC is
// off.
func Start(growth uint64) *Tuner {
	if growth == 0 {
		return nil
	}
	percent := debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	if percent < 0 {
		return nil
	}
	t := &Tuner{growth: growth, percent: percent, set: percent, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	t.adjust()
	t.arm()
	return t
}

// Stop puts back the GC percentage found at Start. A nil Tuner's Stop
// does nothing.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(t.percent)
	}
}

// Percent is the GC percentage the Tuner set last.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.set
}

func (t *Tuner) arm() {
	runtime.AddCleanup(&sentinel{}, func(t *Tuner) {
		t.cleanups.Add(1)
		if t.adjust() {
			t.arm()
		}
	}, t)
}

// adjust sets the percentage for the goal after the last collection and
// reports whether the Tuner still runs.
func (t *Tuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.samples)
	var scanned uint64
	for _, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			scanned += s.Value.Uint64()
		}
	}
	p := percentFor(t.growth, scanned, t.percent)
	// Setting the percentage is cheap but not free (it takes the heap's
	// lock): only when it moves by more than a sixteenth.
	if d := p - t.set; d > t.set/16 || -d > t.set/16 {
		debug.SetGCPercent(p)
		t.set = p
	}
	return true
}

// goHeapMinimum is Go's smallest heap goal at GOGC=100. Go scales it with
// the percentage, so a percentage above growth / goHeapMinimum would make
// the goal that minimum, above growth: a live heap (and roots) smaller
// than it counts as it, which also covers a process that has not
// collected yet (nothing measured).
const goHeapMinimum = 4 << 20

// percentFor is the GC percentage that puts Go's heap goal (live + scanned
// * percent / 100, where scanned is the live heap plus the collector's
// roots) growth bytes above the live heap, never below base.
func percentFor(growth, scanned uint64, base int) int {
	scanned = max(scanned, goHeapMinimum)
	return max(base, int(math.Ceil(float64(growth)*100/float64(scanned))))
}
