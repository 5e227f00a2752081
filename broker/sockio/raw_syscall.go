//go:build !linux || race

package sockio

import "syscall"

// readFD and writeFD are package syscall's Read and Write: elsewhere than
// on Linux, and under the race detector, which learns from them (as from
// every read and write of package net) that what one goroutine wrote
// before a write, a goroutine that read it may use: a test's two nodes
// in one process hand each other memory that way.

func readFD(fd uintptr, p []byte) (int, error) {
	n, err := syscall.Read(int(fd), p)
	if err != nil {
		return 0, err
	}
	return n, nil
}

func writeFD(fd uintptr, p []byte) (int, error) {
	n, err := syscall.Write(int(fd), p)
	if err != nil {
		return 0, err
	}
	return n, nil
}
