package raftgroup

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogWritesToSlogWithLevelsNamesAndArgs(t *testing.T) {
	var buf bytes.Buffer
	l := newHCLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")
	tests := []struct {
		log  func(hclog.Logger)
		want string // "" for nothing logged
	}{
		{func(l hclog.Logger) { l.Info("entering follower state", "term", 3) }, `level=INFO msg="entering follower state" logger=raft term=3`},
		{func(l hclog.Logger) { l.Warn("heartbeat timeout") }, `level=WARN msg="heartbeat timeout" logger=raft`},
		{func(l hclog.Logger) { l.Error("failed", "peer", "n2") }, `level=ERROR msg=failed logger=raft peer=n2`},
		{func(l hclog.Logger) { l.Debug("quiet") }, ""},
		{func(l hclog.Logger) { l.Trace("quieter") }, ""},
		{func(l hclog.Logger) { l.Named("snapshot").With("id", "1-2").Info("saved") }, `msg=saved logger=raft.snapshot id=1-2`},
		{func(l hclog.Logger) { l.StandardLogger(nil).Print("from a std logger") }, `msg="from a std logger" logger=raft`},
	}
	for _, tt := range tests {
		buf.Reset()
		tt.log(l)
		got := strings.TrimSpace(buf.String())
		if tt.want == "" {
			if got != "" {
				t.Errorf("logged %q, want nothing", got)
			}
			continue
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("logged %q, want it to contain %q", got, tt.want)
		}
	}
	if l.IsDebug() || !l.IsInfo() || l.GetLevel() != hclog.Info {
		t.Errorf("levels: IsDebug %v IsInfo %v GetLevel %v with an info handler", l.IsDebug(), l.IsInfo(), l.GetLevel())
	}
}
