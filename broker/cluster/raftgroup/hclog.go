package raftgroup

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogger is hashicorp/raft's logger on top of the broker's *slog.Logger:
// raft's Trace goes to slog's debug level minus 4, the other levels map to
// their slog namesakes. The level filter is the slog handler's alone:
// SetLevel does nothing and GetLevel reports the lowest level it passes.
type hclogger struct {
	l    *slog.Logger
	name string
	args []any
}

var _ hclog.Logger = (*hclogger)(nil)

func newHCLogger(l *slog.Logger, name string) *hclogger {
	return &hclogger{l: l, name: name}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h *hclogger) enabled(level hclog.Level) bool {
	if level == hclog.Off || level == hclog.NoLevel {
		return false
	}
	return h.l.Enabled(context.Background(), slogLevel(level))
}

func (h *hclogger) Log(level hclog.Level, msg string, args ...any) {
	if !h.enabled(level) {
		return
	}
	all := make([]any, 0, 2+len(h.args)+len(args))
	if h.name != "" {
		all = append(all, "logger", h.name)
	}
	all = append(all, h.args...)
	all = append(all, args...)
	h.l.Log(context.Background(), slogLevel(level), msg, all...)
}

func (h *hclogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogger) ImpliedArgs() []any { return h.args }

func (h *hclogger) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any(nil), h.args...), args...)
	return &c
}

func (h *hclogger) Name() string { return h.name }

func (h *hclogger) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (h *hclogger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *hclogger) SetLevel(hclog.Level) {}

func (h *hclogger) GetLevel() hclog.Level {
	for _, level := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(level) {
			return level
		}
	}
	return hclog.Off
}

func (h *hclogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return &hclogWriter{h: h, level: level}
}

// hclogWriter logs each Write as one message (a standard logger's line).
type hclogWriter struct {
	h     *hclogger
	level hclog.Level
}

func (w *hclogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	for len(msg) > 0 && msg[len(msg)-1] == '\n' {
		msg = msg[:len(msg)-1]
	}
	w.h.Log(w.level, msg)
	return len(p), nil
}
