//go:build !linux

package tmpfs

import (
	"runtime"
	"testing"
)

// Mount skips the test: a size-limited tmpfs is mounted only on Linux.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	t.Skipf("needs a real full filesystem: a size-limited tmpfs is mounted only on Linux, not %s", runtime.GOOS)
	return ""
}

// MountAt skips the test, as Mount does.
func MountAt(t testing.TB, dir string, size int64) {
	t.Helper()
	t.Skipf("needs a real filesystem of its own: a tmpfs is mounted only on Linux, not %s", runtime.GOOS)
}

// ReadOnly is never reached: MountAt skipped the test.
func ReadOnly(t testing.TB, dir string) {
	t.Helper()
	t.Skipf("a tmpfs is mounted only on Linux, not %s", runtime.GOOS)
}

// Writable is never reached: MountAt skipped the test.
func Writable(t testing.TB, dir string) {
	t.Helper()
	t.Skipf("a tmpfs is mounted only on Linux, not %s", runtime.GOOS)
}
