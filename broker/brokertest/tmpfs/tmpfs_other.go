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
