package pathname_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/store/pathname"
)

func TestEscape(t *testing.T) {
	long := strings.Repeat("q", 255)
	for _, tc := range []struct{ name, want string }{
		{"", "%"},
		{".", "%2E"},
		{"..", "%2E%2E"},
		{"/", "%2F"},
		{"a/../b", "a%2F%2E%2E%2Fb"},
		{"a b", "a%20b"},
		{"%", "%25"},
		{"%2F", "%252%46"},
		{"\x00", "%00"},
		{"Orders", "%4Frders"},
		{"é", "%C3%A9"},
		{"\xff", "%FF"},
		{"order-events_1", "order-events_1"},
		{strings.Repeat("a", pathname.MaxLen), strings.Repeat("a", pathname.MaxLen)},
	} {
		if got := pathname.Escape(tc.name); got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Long names: a prefix, the marker and a hash, within MaxLen.
	for _, name := range []string{long, strings.Repeat(".", 255), strings.Repeat("a", pathname.MaxLen+1), strings.Repeat("é", 120)} {
		got := pathname.Escape(name)
		if len(got) > pathname.MaxLen || !strings.Contains(got, "~") {
			t.Errorf("Escape(%d-byte name) = %q (%d bytes), want a hashed form within %d", len(name), got, len(got), pathname.MaxLen)
		}
		checkComponent(t, name, got)
	}
	if pathname.Escape(long) == pathname.Escape(long[:254]+"r") {
		t.Error("two long names with a common prefix share a component")
	}
}

// checkComponent fails unless got is one valid component that stays under a root.
func checkComponent(t *testing.T, name, got string) {
	t.Helper()
	if got == "" || got == "." || got == ".." || strings.ContainsAny(got, "/\\\x00.") || len(got) > pathname.MaxLen {
		t.Fatalf("Escape(%q) = %q: not one safe component", name, got)
	}
	root := filepath.FromSlash("/data/vhosts")
	p := filepath.Join(root, got)
	if filepath.Dir(p) != root || filepath.Base(p) != got {
		t.Fatalf("Escape(%q) = %q leaves %s: joined %s", name, got, root, p)
	}
}

// FuzzEscape checks Escape is injective (also under case folding, for
// case-insensitive filesystems) and always one component inside its root.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", ".", "..", "/", "%", "%2E", "a.b", "A", "a", "é", "\x00", strings.Repeat("x", 255), strings.Repeat("%", 255)} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := pathname.Escape(a), pathname.Escape(b)
		checkComponent(t, a, ea)
		checkComponent(t, b, eb)
		if a != b && strings.EqualFold(ea, eb) {
			t.Fatalf("Escape(%q) = %q and Escape(%q) = %q meet", a, ea, b, eb)
		}
		if !strings.Contains(ea, "~") && unescape(ea) != a {
			t.Fatalf("Escape(%q) = %q decodes to %q", a, ea, unescape(ea))
		}
		if a == b && ea != eb {
			t.Fatalf("Escape(%q) not deterministic: %q, %q", a, ea, eb)
		}
	})
}

// unescape decodes a short name's component (the inverse that makes
// Escape injective).
func unescape(s string) string {
	if s == "%" {
		return ""
	}
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "\x00invalid"
			}
			b = append(b, byte(v))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}
