package streamlog

import (
	"errors"
	"os"
	"syscall"
)

// fdatasync flushes a file's data (and the metadata needed to read it).
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
