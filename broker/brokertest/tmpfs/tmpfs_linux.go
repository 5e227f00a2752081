//go:build linux

package tmpfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a new temp directory and unmounts
// it when the test ends (after the cleanups registered later, such as a
// broker's stop). The test is skipped, saying why, when the process may
// not mount (not root, or no CAP_SYS_ADMIN).
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("needs a real full filesystem: mounting a tmpfs is not permitted here (uid %d): %v", os.Getuid(), err)
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
	return dir
}
