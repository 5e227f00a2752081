// Package pathname turns a name a client chose (vhost, queue, stream,
// super-stream partition; exchange and user names too, should one ever
// name a file) into one file-name component. Every such name goes
// through Escape before it becomes part of a path; nothing else builds
// paths from client input.
//
// Rules of Escape(name):
//
//   - Byte-wise and fixed-width: a byte in [a-z0-9_-] is kept; every other
//     byte becomes '%' and two upper-case hex digits (three bytes). This
//     includes '.', '/', '\\', '%', NUL, every byte >= 0x80 (UTF-8 or not)
//     and the upper-case letters A-Z.
//   - So the result is never "." or "..", never contains a separator or
//     NUL, and never contains '.': file names the store derives from a
//     component (name + ".converting", ".tmp") cannot be another name's
//     component. filepath.Join(root, Escape(name)) is always a direct child
//     of root.
//   - Injective: distinct names give distinct components (decode the
//     escapes to get the name back). The empty name is "%", which no
//     other name produces.
//   - Case-insensitive filesystems (macOS APFS/HFS+ by default): upper-case
//     letters are escaped and escape digits are always upper case, so two
//     distinct names never differ only in letter case either; all non-ASCII
//     bytes are escaped, so Unicode normalization cannot merge two names.
//   - Length: components are at most MaxLen (200) bytes, leaving room under
//     NAME_MAX (255) for the suffixes the store adds. A name whose escaped
//     form is longer (RabbitMQ names are up to 255 bytes, 765 escaped)
//     becomes the longest prefix of its escaped form that fits, without
//     splitting an escape, then '~' and the hex SHA-256 of the whole name.
//     '~' never appears in a short name's component, so a long name never
//     meets a short one; two long names meet only if SHA-256 collides.
//     The mapping is deterministic: the same name always gives the same
//     component.
//
// Windows (reserved names such as "con") is not a target: the broker
// builds for Linux and macOS.
package pathname

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxLen is the longest component Escape returns, in bytes.
const MaxLen = 200

// hashMarker separates a long name's escaped prefix from its hash.
const hashMarker = '~'

const hexDigits = "0123456789ABCDEF"

// Escape returns name as one safe file-name component (see the package doc).
func Escape(name string) string {
	if name == "" {
		return "%"
	}
	n := 0
	for i := 0; i < len(name); i++ {
		n += width(name[i])
	}
	if n <= MaxLen {
		return string(appendEscaped(make([]byte, 0, n), name, n))
	}
	sum := sha256.Sum256([]byte(name))
	room := MaxLen - 1 - hex.EncodedLen(len(sum))
	b := appendEscaped(make([]byte, 0, MaxLen), name, room)
	b = append(b, hashMarker)
	return string(hex.AppendEncode(b, sum[:]))
}

// appendEscaped appends the escaped bytes of name to b while they fit in
// limit bytes, never splitting an escape.
func appendEscaped(b []byte, name string, limit int) []byte {
	used := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		w := width(c)
		if used+w > limit {
			break
		}
		used += w
		if w == 1 {
			b = append(b, c)
		} else {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&0xF])
		}
	}
	return b
}

// width is how many bytes c takes escaped: 1 for a kept byte, 3 otherwise.
func width(c byte) int {
	if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
		return 1
	}
	return 3
}
