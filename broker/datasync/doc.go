// Package datasync makes a file's data durable: fdatasync(2) where the
// system has it (Linux: the data and the metadata needed to read it back,
// retried on EINTR), a full fsync elsewhere (os.File.Sync; on macOS
// F_FULLFSYNC, which also flushes the drive's cache). It is a leaf package
// under every writer that promises durability (the stream log, the
// cluster's log store).
package datasync
