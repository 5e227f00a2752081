package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "warren.yaml")
	if err := os.WriteFile(file, []byte("data_dir: /from/file\namqp:\n  listen: \":7000\"\n  heartbeat: 30s\nstorage:\n  queue_version: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(file, []string{"WARREN_AMQP_LISTEN=:8000", "WARREN_AUTH_LOOPBACK_USERS=a, b", "HOME=/root"})
	if err != nil {
		t.Fatal(err)
	}
	if err := Set(&cfg, "storage.embed_messages_below", "1024"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"file overrides default", cfg.DataDir, "/from/file"},
		{"env overrides file", cfg.AMQP.Listen, ":8000"},
		{"duration from file", cfg.AMQP.Heartbeat, 30 * time.Second},
		{"int from file", cfg.Storage.QueueVersion, 1},
		{"list from env", strings.Join(cfg.Auth.LoopbackUsers, "|"), "a|b"},
		{"--set", cfg.Storage.EmbedMessagesBelow, 1024},
		{"untouched default", cfg.HTTP.Listen, ":15672"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
}

func TestBadSettingsAreReportedByKey(t *testing.T) {
	tests := []struct {
		name, yaml, env, want string
	}{
		{"unknown key", "bogus: 1\n", "", "bogus"},
		{"bad duration in env", "", "WARREN_AMQP_HEARTBEAT=soon", "WARREN_AMQP_HEARTBEAT"},
		{"bad queue version", "storage:\n  queue_version: 3\n", "", "storage.queue_version"},
		{"small frame max", "amqp:\n  frame_max: 100\n", "", "amqp.frame_max"},
		{"no AMQP output buffer", "amqp:\n  output_buffer_limit: 0\n", "", "amqp.output_buffer_limit"},
		{"huge AMQP output buffer", "", "WARREN_AMQP_OUTPUT_BUFFER_LIMIT=2147483648", "amqp.output_buffer_limit"},
		{"unknown scheduling policy", "", "WARREN_PROCESS_SCHED_POLICY=fifo", "process.sched_policy"},
		{"no HTTP idle timeout", "http:\n  idle_timeout: 0s\n", "", "http.idle_timeout"},
		{"no HTTP read timeout", "", "WARREN_HTTP_READ_TIMEOUT=0s", "http.read_timeout"},
		{"no HTTP connections", "http:\n  max_connections: 0\n", "", "http.max_connections"},
		{"statistics sampled too often", "http:\n  collect_statistics_interval: 10ms\n", "", "http.collect_statistics_interval"},
		{"no metrics connections", "", "WARREN_PROMETHEUS_MAX_CONNECTIONS=0", "prometheus.max_connections"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "c.yaml")
			_ = os.WriteFile(file, []byte(tt.yaml), 0o600)
			var env []string
			if tt.env != "" {
				env = []string{tt.env}
			}
			cfg, err := Load(file, env)
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v does not name %q", err, tt.want)
			}
		})
	}
	if err := Set(&Config{}, "no.such.key", "1"); err == nil {
		t.Fatal("--set of an unknown key accepted")
	}
}
