//go:build linux && !race

package sockio

import (
	"syscall"
	"unsafe"
)

// readFD and writeFD are read(2) and write(2) on a non-blocking socket
// without entersyscall/exitsyscall: they cannot block, so the runtime
// need not hand the P off, nor wake its monitor thread (which, woken for
// each call of a goroutine that otherwise idles, costs a context switch).
// len(p) > 0.
func readFD(fd uintptr, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func writeFD(fd uintptr, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
