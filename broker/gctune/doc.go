// Package gctune sets how much garbage the broker's heap may hold before
// Go's collector runs.
//
// Go collects when the heap has grown by GOGC percent (100) of what was
// live after the last collection. A broker's live heap is small (tens of
// MiB: its queues keep messages on disk past a window) while it allocates
// hundreds of MiB a second under load (frames, messages in flight), so at
// GOGC 100 it collects many times a second and marking takes a tenth to a
// sixth of its CPU. A Tuner lets the heap grow by at least a fixed amount
// (process.gc_min_heap_growth, 32 MiB by default) before a collection: a
// broker whose live heap is small collects a few times less often, one
// whose live heap is larger than that amount keeps Go's percentage.
//
// The goal is set again after every collection (a cleanup attached to an
// object each collection frees, so an idle broker pays nothing), from
// runtime/metrics: the live heap and the collector's roots (stacks,
// globals), which count in Go's heap goal. GOGC=off in the environment
// turns the tuner off; any other GOGC is its percentage; GOMEMLIMIT, when
// set, still makes Go collect sooner as memory nears it.
//
// The GC percentage is the process's: one Tuner per process; Stop puts
// back the percentage it found.
package gctune
