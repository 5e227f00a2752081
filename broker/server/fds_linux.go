package server

import (
	"os"
	"syscall"
)

// openFDs counts the process's open file descriptors and returns its
// limit (RLIMIT_NOFILE); -1 where unknown.
func openFDs() (used, limit int64) {
	used, limit = -1, -1
	if es, err := os.ReadDir("/proc/self/fd"); err == nil {
		used = int64(len(es)) - 1 // the directory being read
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		limit = int64(rl.Cur)
	}
	return used, limit
}
