//go:build !linux && !darwin

package server

// systemMemory is the machine's total memory in bytes; 0 (unknown) where
// Warren does not know how to ask: the memory alarm then needs
// limits.memory_high_watermark set in bytes.
func systemMemory() int64 { return 0 }
