//go:build !linux

package sockio

import "syscall"

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
