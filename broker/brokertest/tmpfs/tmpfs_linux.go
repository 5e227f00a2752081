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
	MountAt(t, dir, size)
	return dir
}

// MountAt mounts a tmpfs of size bytes on dir (made if missing), as Mount
// does on a directory of its own: for a test that needs one directory of
// a node's data directory on a filesystem of its own.
func MountAt(t testing.TB, dir string, size int64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("make the mount point %s: %v", dir, err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("needs a real filesystem of its own: mounting a tmpfs is not permitted here (uid %d): %v", os.Getuid(), err)
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
}

// ReadOnly remounts the tmpfs at dir read-only, as the kernel remounts a
// disk's filesystem after I/O errors (errors=remount-ro): from then on
// every write, create and remove there fails with EROFS, root's too.
func ReadOnly(t testing.TB, dir string) {
	t.Helper()
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
}

// Writable remounts the tmpfs at dir read-write again (the disk repaired).
func Writable(t testing.TB, dir string) {
	t.Helper()
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT, ""); err != nil {
		t.Fatalf("remount %s read-write: %v", dir, err)
	}
}
