package server

import "golang.org/x/sys/unix"

// systemMemory is the machine's total memory in bytes (0 if unknown).
func systemMemory() int64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return int64(n)
}
