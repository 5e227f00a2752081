package stream

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/stream/proto"
)

// The last line: a panic on a connection's reader (a bug) closes that
// connection with internal error, logged at error with its stack.
func TestSafelyRecoversAndLogs(t *testing.T) {
	var log bytes.Buffer
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &conn{srv: &Server{log: slog.New(slog.NewTextHandler(&log, nil))}, nc: a}
	err := c.safely(func() error { panic("boom") })
	var pe *protoError
	if !errors.As(err, &pe) || pe.code != proto.CodeInternalError {
		t.Fatalf("safely returned %v", err)
	}
	if out := log.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "boom") || !strings.Contains(out, "safely_test.go") {
		t.Fatalf("log: %s", out)
	}
}
