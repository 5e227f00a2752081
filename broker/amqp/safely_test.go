package amqp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// The last line: a panic on a connection's reader (a bug) becomes an error
// for that connection, logged at error with its stack.
func TestSafelyRecoversAndLogs(t *testing.T) {
	var log bytes.Buffer
	c := &conn{srv: &Server{log: slog.New(slog.NewTextHandler(&log, nil))}, name: "probe"}
	err := c.safely("handshake", func() error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("safely returned %v", err)
	}
	if out := log.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "recovered from a panic") || !strings.Contains(out, "safely_test.go") {
		t.Fatalf("log: %s", out)
	}
}
