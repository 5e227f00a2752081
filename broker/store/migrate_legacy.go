package store

import (
	"fmt"
	"strings"
)

// The directory names of layout version 1 (before pathname.Escape), kept
// only to find a version-1 data directory's files. Frozen: never change
// them. They were neither injective nor safe: queue ".." named the vhost's
// directory, and runes were escaped with a variable width.

// legacyVhostDirName is version 1's vhost directory name.
func legacyVhostDirName(name string) string {
	var sb strings.Builder
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			sb.WriteRune(r)
		} else {
			fmt.Fprintf(&sb, "%%%02X", r)
		}
	}
	if sb.Len() == 0 {
		return "%"
	}
	return sb.String()
}

// legacyQueueDirName is version 1's classic queue directory name.
func legacyQueueDirName(name string) string {
	var sb strings.Builder
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			sb.WriteRune(r)
		} else {
			fmt.Fprintf(&sb, "%%%02X", r)
		}
	}
	return sb.String()
}

// legacyStreamDirName is version 1's stream directory name.
func legacyStreamDirName(name string) string {
	var sb strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0 {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}
