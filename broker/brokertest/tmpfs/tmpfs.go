// Package tmpfs gives tests a small real filesystem that fills up: a tmpfs
// mounted with a size limit (no reserved blocks, so ENOSPC is what a full
// disk really returns), and a filler file to take its space; or that goes
// read-only (ReadOnly: EROFS, as a disk remounted after I/O errors). It is a leaf
// package (it imports nothing of Warren), so any package's tests can use it.
package tmpfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Free is the space left on the filesystem holding dir, in bytes.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// Fill writes the file at path until it is n bytes long, or, with n < 0,
// until the filesystem is full (ENOSPC). It returns the file's size.
func Fill(t testing.TB, path string, n int64) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("create filler %s: %v", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	size := st.Size()
	chunk := make([]byte, 64<<10)
	for n < 0 || size < n {
		b := chunk
		if n >= 0 && n-size < int64(len(b)) {
			b = b[:n-size]
		}
		w, err := f.Write(b)
		size += int64(w)
		if err != nil {
			if n < 0 && errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatalf("fill %s: %v", filepath.Base(path), err)
		}
	}
	return size
}
