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
		{"node name with a space", "cluster:\n  node_name: a b\n", "", "cluster.node_name"},
		{"empty node name", "", "WARREN_CLUSTER_NODE_NAME=", "cluster.node_name"},
		{"seed without port", "", "WARREN_CLUSTER_SEEDS=n1:25672,n2", "cluster.seeds"},
		{"advertise without port", "cluster:\n  advertise: n1\n", "", "cluster.advertise"},
		{"short secret", "cluster:\n  secret: abc\n", "", "cluster.secret"},
		{"two secrets", "cluster:\n  secret: 0123456789abcdef\n  secret_file: /x\n", "", "cluster.secret"},
		{"half of cluster TLS", "cluster:\n  tls:\n    cert_file: /c.pem\n", "", "cluster.tls"},
		{"top-level node_name moved", "node_name: warren@a\n", "", "node_name"},
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

func TestClusterSecret(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	var c Cluster
	first, err := c.LoadSecret()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(home, ".warren-cluster-secret"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("default secret file: %v, mode %v", err, st.Mode())
	}
	second, err := c.LoadSecret()
	if err != nil || string(second) != string(first) || len(first) != 64 {
		t.Fatalf("second node of the same user reads %q (%v), first made %q", second, err, first)
	}
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("  mounted-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Cluster{SecretFile: file}.LoadSecret()
	if err != nil || string(got) != "mounted-secret-0123456789" {
		t.Fatalf("secret file: %q, %v", got, err)
	}
	if _, err := (Cluster{SecretFile: filepath.Join(home, "missing")}).LoadSecret(); err == nil {
		t.Fatal("a missing cluster.secret_file was made instead of refused")
	}
}

func TestClusterDefaults(t *testing.T) {
	cfg := Default()
	if err := Set(&cfg, "cluster.seeds", "127.0.0.1:25672, 127.0.0.1:25673"); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Cluster.Seeds) != 2 || cfg.Cluster.Seeds[1] != "127.0.0.1:25673" {
		t.Fatalf("seeds %q", cfg.Cluster.Seeds)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if cfg.Cluster.NodeName != "warren@"+host {
		t.Fatalf("node name %q", cfg.Cluster.NodeName)
	}
	addr, err := cfg.Cluster.AdvertiseAddr()
	if err != nil || addr != host+":25672" {
		t.Fatalf("advertise %q, %v", addr, err)
	}
}
