//go:build !linux

package server

// openFDs is unknown (-1) where Warren does not know how to ask.
func openFDs() (used, limit int64) { return -1, -1 }
