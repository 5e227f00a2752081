package mgmt

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzEscapeSegments sends arbitrary paths through the API's path
// rewriting: it never panics; what it hands on has no empty segment and no
// trailing slash (so the mux neither redirects nor misses a route); and
// each segment decodes to what the client's segment decodes to, an empty
// one to "".
func FuzzEscapeSegments(f *testing.F) {
	for _, p := range []string{"/api/connections/", "/api/exchanges/%2F//publish", "/api/queues/%2F/a%2Fb", "/api/x/%25/%", "//", "/", "/api/%zz/", "/a//b//"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !strings.HasPrefix(raw, "/") {
			raw = "/" + raw
		}
		u, err := url.Parse(raw)
		if err != nil || u.Path == "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.Host != "" {
			return
		}
		var got *http.Request
		h := escapeSegments(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r }))
		h.ServeHTTP(httptest.NewRecorder(), &http.Request{Method: "GET", URL: u})
		if got == nil {
			t.Fatal("the handler was not called")
		}
		p := got.URL.Path
		if len(p) > 1 && (strings.HasSuffix(p, "/") || strings.Contains(p, "//")) {
			t.Fatalf("%q became %q: an empty segment or a trailing slash", raw, p)
		}
		in := strings.Split(strings.TrimSuffix(u.EscapedPath(), "/"), "/")
		out := strings.Split(p, "/")
		if len(u.EscapedPath()) > 1 && len(in) != len(out) {
			t.Fatalf("%q became %q: %d segments, want %d", raw, p, len(out), len(in))
		}
		for i := 1; i < len(in) && len(u.EscapedPath()) > 1; i++ {
			want := in[i]
			if d, err := url.PathUnescape(want); err == nil {
				want = d
			}
			seg := out[i]
			var have string
			if seg == emptySegment {
				have = ""
			} else if d, err := url.PathUnescape(seg); err == nil {
				have = d
			} else {
				t.Fatalf("%q: segment %q does not decode: %v", raw, seg, err)
			}
			if have != want {
				t.Fatalf("%q: segment %d decodes to %q, want %q", raw, i, have, want)
			}
		}
	})
}
