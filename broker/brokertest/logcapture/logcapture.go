// Package logcapture records what a component logs, so a test can assert
// that it said something (a repair at warn, naming the file). It is a leaf
// package: tests of any package can use it.
package logcapture

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Line is one log record: its level, message and attributes (groups and
// With attributes flattened, values as strings).
type Line struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func (l Line) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %q", l.Level, l.Msg)
	for k, v := range l.Attrs {
		fmt.Fprintf(&sb, " %s=%s", k, v)
	}
	return sb.String()
}

// Log captures records at every level.
type Log struct {
	mu    sync.Mutex
	lines []Line
}

// New returns a capture and a logger writing to it.
func New() (*Log, *slog.Logger) {
	c := &Log{}
	return c, slog.New(&handler{c: c})
}

// Lines returns the records at level or above, in order.
func (c *Log) Lines(level slog.Level) []Line {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Line
	for _, l := range c.lines {
		if l.Level >= level {
			out = append(out, l)
		}
	}
	return out
}

// Reset forgets what was captured.
func (c *Log) Reset() {
	c.mu.Lock()
	c.lines = nil
	c.mu.Unlock()
}

type handler struct {
	c     *Log
	attrs []slog.Attr
}

func (h *handler) Enabled(context.Context, slog.Level) bool { return true }

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	l := Line{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		l.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		l.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.c.mu.Lock()
	h.c.lines = append(h.c.lines, l)
	h.c.mu.Unlock()
	return nil
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{c: h.c, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *handler) WithGroup(string) slog.Handler { return h }
