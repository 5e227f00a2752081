package datasync

import (
	"errors"
	"os"
	"syscall"
)

// File flushes a file's data (and the metadata needed to read it).
func File(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
