package mgmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/vhost"
)

// Server is the HTTP API.
type Server struct {
	b     Broker
	log   *slog.Logger
	mux   *http.ServeMux
	rates rates
}

// NewServer builds the API's routes.
func NewServer(b Broker, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{b: b, log: log, mux: http.NewServeMux()}
	s.takeSample()
	s.routes()
	b.HandleNode(methodNode, s.answerNode)
	b.HandleNode(methodItems, s.answerItems)
	b.HandleNode(methodCloseConnection, s.answerCloseConnection)
	return s
}

// Handler returns the API handler.
func (s *Server) Handler() http.Handler { return escapeSegments(s.mux) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // a reason reads 'a' -> 'b', as RabbitMQ writes it
		_ = enc.Encode(v)
	}
}

func writeError(w http.ResponseWriter, status int, kind, reason string) {
	writeJSON(w, status, map[string]string{"error": kind, "reason": reason})
}

// writeErr maps broker errors onto RabbitMQ's status codes.
func writeErr(w http.ResponseWriter, err error) {
	var ve *vhost.Error
	var ae *accessError
	switch {
	case errors.As(err, &ae):
		writeError(w, http.StatusUnauthorized, "not_authorised", ae.reason)
	case errors.As(err, &ve) && errors.Is(err, vhost.ErrAccessRefused):
		writeError(w, http.StatusUnauthorized, "not_authorised", ve.Text)
	case errors.As(err, &ve) && errors.Is(err, vhost.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", ve.Text)
	case errors.As(err, &ve):
		writeError(w, http.StatusBadRequest, "bad_request", ve.Text)
	case errors.Is(err, meta.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, meta.ErrInvalid), errors.Is(err, errBadRequest):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal_error", err.Error())
	}
}

var errBadRequest = errors.New("bad request")

func decodeBody(r *http.Request, v any) error {
	if r.Body == nil {
		return nil
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<20))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil && !errors.Is(err, errEOF) && err.Error() != "EOF" {
		return fmt.Errorf("%w: invalid JSON: %v", errBadRequest, err)
	}
	return nil
}

var errEOF = errors.New("EOF")

// pathVhost decodes a vhost path segment ("%2F" is "/").
func pathVhost(r *http.Request, name string) string { return pv(r, name) }

// pv returns a path wildcard's value, decoded (see escapeSegments).
func pv(r *http.Request, name string) string {
	v := r.PathValue(name)
	if v == emptySegment {
		return ""
	}
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// emptySegment stands for an empty path segment inside a path, as in
// RabbitMQ's /api/exchanges/%2F//publish (the default exchange, whose name
// is ""). Re-escaped segments never read "%00" (escapeSegments writes a
// client's "%" as "%25"), so it cannot be a name a client sent.
const emptySegment = "%00"

// escapeSegments keeps escaped slashes inside path segments: RabbitMQ's
// API names the default vhost "%2F", which would otherwise split the path.
// Each segment is decoded and re-escaped ("%" and "/" only) into URL.Path, so
// the mux matches segment by segment and pv decodes the value. As RabbitMQ
// does, a trailing slash is ignored (/api/connections/ is /api/connections)
// and an empty segment inside the path is an empty name, not a path to
// clean and redirect (a redirect turns a POST into a GET).
func escapeSegments(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := r.URL.EscapedPath()
		if len(raw) > 1 && (strings.Contains(raw, "%") || strings.HasSuffix(raw, "/") || strings.Contains(raw, "//")) {
			segs := strings.Split(strings.TrimSuffix(raw, "/"), "/")
			for i, s := range segs {
				if s == "" && i > 0 {
					segs[i] = emptySegment
					continue
				}
				if u, err := url.PathUnescape(s); err == nil {
					s = u
				}
				segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "%", "%25"), "/", "%2F")
			}
			r2 := r.Clone(r.Context())
			r2.URL.Path = strings.Join(segs, "/")
			r2.URL.RawPath = ""
			r = r2
		}
		next.ServeHTTP(w, r)
	})
}

func vhostFilter(r *http.Request) (string, bool) {
	if pv(r, "vhost") == "" {
		return "", false
	}
	return pathVhost(r, "vhost"), true
}

func (s *Server) vhostOr404(w http.ResponseWriter, name string) (*vhost.Vhost, bool) {
	v, ok := s.b.Vhost(name)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("vhost '%s' not found", name))
		return nil, false
	}
	return v, true
}

// normalizeNumbers turns json.Number values into int64 or float64, recursively.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
		return x
	}
	return v
}

func tagsOf(v any) []string {
	switch t := v.(type) {
	case string:
		var out []string
		for _, p := range strings.Split(t, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
