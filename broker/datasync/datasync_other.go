//go:build !linux

package datasync

import "os"

// File flushes a file's data. Where fdatasync(2) is not available it
// is a full fsync (os.File.Sync; on macOS F_FULLFSYNC, which also flushes
// the drive's cache).
func File(f *os.File) error { return f.Sync() }
