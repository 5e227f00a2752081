// Package damage breaks files the way disks and crashes do, for recovery
// tests: a flipped bit in the middle, a tail cut off. It is a leaf package
// (it imports nothing of Warren's), so tests of any package can use it.
package damage

import (
	"os"
	"testing"
)

// FlipByte flips one bit of the byte at off in the file at path.
func FlipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// CutTail removes the last n bytes of the file at path, as a write torn by
// a crash leaves it.
func CutTail(t testing.TB, path string, n int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()-n); err != nil {
		t.Fatal(err)
	}
}
