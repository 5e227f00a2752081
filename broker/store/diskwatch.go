package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
)

// DiskWatch raises the disk alarm before the disk fills, and at once when a
// write finds it full. The resource watch samples free space every second
// (Sample); between samples every writer reserves what it is about to
// write (Reserve), which lowers a running estimate of the free space. When
// the estimate crosses the limit, the writer takes a fresh sample on the
// spot, so a fast publisher is blocked with the margin intact instead of a
// second later with the disk full. A write that fails with ENOSPC raises
// the alarm immediately (NoSpace). The alarm clears only on a sample that
// finds free space at or above the limit again.
//
// Safe for concurrent use. onChange runs with the watch's notify lock held
// (changes are reported one at a time, in order) and must not call back
// into the watch; the lock order is DiskWatch.notifyMu, then whatever
// onChange takes.
type DiskWatch struct {
	dir      string
	limit    int64
	onChange func(alarm bool)

	// est is the free space estimate: the last sample less what writers
	// reserved since.
	est   atomic.Int64
	alarm atomic.Bool

	free atomic.Int64 // last sample (-1 unknown)

	notifyMu sync.Mutex
}

// NewDiskWatch watches the filesystem holding dir against limit (bytes;
// 0 or less: never raise the alarm for low space, but still on ENOSPC).
// onChange (may be nil) is told when the alarm is raised or cleared.
func NewDiskWatch(dir string, limit int64, onChange func(alarm bool)) *DiskWatch {
	d := &DiskWatch{dir: dir, limit: limit, onChange: onChange}
	d.est.Store(1 << 62)
	d.free.Store(-1)
	return d
}

// Alarm reports whether the disk alarm is raised.
func (d *DiskWatch) Alarm() bool { return d != nil && d.alarm.Load() }

// Free is the free space found by the last sample (-1 unknown).
func (d *DiskWatch) Free() int64 { return d.free.Load() }

// Sample reads the free space, resets the estimate and raises or clears the
// alarm. It returns the free space (-1 when statfs failed).
func (d *DiskWatch) Sample() int64 {
	d.notifyMu.Lock()
	defer d.notifyMu.Unlock()
	return d.sampleLocked(0, true)
}

// sampleLocked reads the free space; the alarm is raised when what is
// about to be written (n) would take it below the limit, or does not fit.
func (d *DiskWatch) sampleLocked(n int64, mayClear bool) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.dir, &st); err != nil {
		d.free.Store(-1)
		return -1
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	d.free.Store(free)
	d.est.Store(free - n)
	// A disk with nothing free is full whatever the limit.
	low := free-n < d.limit || free <= n
	if low || mayClear {
		d.setLocked(low)
	}
	return free
}

func (d *DiskWatch) setLocked(alarm bool) {
	if d.alarm.Swap(alarm) != alarm && d.onChange != nil {
		d.onChange(alarm)
	}
}

// Reserve is called by a writer before it writes n bytes. It costs an
// atomic add unless the estimate falls below the limit, when it samples
// the disk (raising the alarm if the space is really low).
func (d *DiskWatch) Reserve(n int64) {
	if d == nil {
		return
	}
	if est := d.est.Add(-n); (est >= d.limit && est > 0) || d.alarm.Load() {
		return
	}
	d.notifyMu.Lock()
	defer d.notifyMu.Unlock()
	if d.alarm.Load() {
		return // another writer raised it meanwhile
	}
	// A writer never clears the alarm: only the resource watch does, so a
	// publisher blocked by it sees one raise and one clear.
	d.sampleLocked(n, false)
}

// NoSpace records that a write failed because the disk is full: the alarm
// is raised at once. It reports whether err is such a failure.
func (d *DiskWatch) NoSpace(err error) bool {
	if !IsNoSpace(err) {
		return false
	}
	if d != nil {
		d.notifyMu.Lock()
		d.est.Store(0)
		d.setLocked(true)
		d.notifyMu.Unlock()
	}
	return true
}

// IsNoSpace reports whether err is a write failure for lack of space
// (ENOSPC, or EDQUOT: a quota is a full disk to this process).
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
