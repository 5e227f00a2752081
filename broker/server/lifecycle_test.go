package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/logcapture"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/server"
)

// TestSIGTERMStopsGracefully checks a SIGTERM'd broker closes clients with
// CONNECTION_FORCED, exits 0, and records a clean shutdown.
func TestSIGTERMStopsGracefully(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the warren binary")
	}
	bin := brokertest.BuildWarren(t)
	dir := t.TempDir()
	p := startProcess(t, bin, dir)
	conn, err := amqp091.Dial(p.url())
	if err != nil {
		t.Fatal(err)
	}
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch, _ := conn.Channel()
	if _, err := ch.QueueDeclare("kept", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = ch.Confirm(false)
	dc, err := ch.PublishWithDeferredConfirm("", "kept", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("survivor")})
	if err != nil || !dc.Wait() {
		t.Fatalf("publish: %v", err)
	}
	p.Signal(syscall.SIGTERM)
	select {
	case e := <-closed:
		if e == nil || e.Code != 320 {
			t.Fatalf("client closed with %v, want 320 CONNECTION_FORCED", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("client not told about the shutdown")
	}
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("warren exited with %v, want 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("warren did not exit after SIGTERM")
	}
	markers, _ := filepath.Glob(filepath.Join(dir, "vhosts", "*", "queues", "kept", "clean"))
	if len(markers) != 1 {
		t.Fatalf("no clean-shutdown marker for queue 'kept' (found %v)", markers)
	}
	p2 := startProcess(t, bin, dir)
	conn2, err := amqp091.Dial(p2.url())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	ch2, _ := conn2.Channel()
	d, ok, err := ch2.Get("kept", true)
	if err != nil || !ok || string(d.Body) != "survivor" || d.Redelivered {
		t.Fatalf("after restart got %q ok=%v redelivered=%v err=%v", d.Body, ok, d.Redelivered, err)
	}
}

// TestQueueVersionChangeConvertsQueuesWithoutRestart changes a vhost's
// storage policy over the HTTP API and checks each queue's files move to the
// other layout while its messages stay.
func TestQueueVersionChangeConvertsQueuesWithoutRestart(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	_ = ch.Confirm(false)
	for _, q := range []string{"conv-a", "conv-b"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			body := fmt.Sprintf("%s-%d", q, i)
			if i%10 == 0 {
				body += strings.Repeat("!", 5000) // into the message store
			}
			dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)})
			if err != nil || !dc.Wait() {
				t.Fatalf("publish: %v", err)
			}
		}
	}
	version := func(q string) string {
		data, _ := os.ReadFile(filepath.Join(n.Cfg.DataDir, "vhosts", "%2F", "queues", q, "options"))
		return strings.TrimSpace(string(data))
	}
	if v := version("conv-a"); v != "2" {
		t.Fatalf("new queue is in version %q, want the default 2", v)
	}
	if code := n.API(t, http.MethodPut, "/api/vhosts/%2F", map[string]any{"storage": map[string]any{"queue-version": 1}}, nil); code != http.StatusNoContent {
		t.Fatalf("PUT vhost storage: status %d", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for version("conv-a") != "1" || version("conv-b") != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("queues still in versions %q %q", version("conv-a"), version("conv-b"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, q := range []string{"conv-a", "conv-b"} {
		for i := 0; i < 100; i++ {
			d, ok, err := ch.Get(q, true)
			if err != nil || !ok || !strings.HasPrefix(string(d.Body), fmt.Sprintf("%s-%d", q, i)) {
				t.Fatalf("%s message %d after conversion: %q ok=%v err=%v", q, i, d.Body, ok, err)
			}
		}
	}
	if _, err := ch.QueueDeclarePassive("conv-a", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownFinishesAVhostDeletion: a vhost deleted just before the node
// stops is gone from disk once Shutdown returns (its removal runs in the
// background and Shutdown waits for it), so nothing is left half removed.
func TestShutdownFinishesAVhostDeletion(t *testing.T) {
	n := brokertest.Start(t)
	if code := n.API(t, http.MethodPut, "/api/vhosts/doomed", map[string]any{}, nil); code/100 != 2 {
		t.Fatalf("PUT vhost: status %d", code)
	}
	if code := n.API(t, http.MethodPut, "/api/permissions/doomed/guest", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, nil); code/100 != 2 {
		t.Fatalf("PUT permissions: status %d", code)
	}
	conn, err := amqp091.Dial(n.URLFor("guest", "guest", "doomed"))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if _, err := ch.QueueDeclare(fmt.Sprintf("q%d", i), true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(n.Cfg.DataDir, "vhosts", "doomed")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("vhost directory: %v", err)
	}
	if code := n.API(t, http.MethodDelete, "/api/vhosts/doomed", nil, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE vhost: status %d", code)
	}
	n.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("after shutdown the deleted vhost's directory is still there (stat: %v)", err)
	}
}

// A clean stop logs no errors: the listeners it closes are not failures.
func TestShutdownLogsNoErrors(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	ctx := context.Background()
	b, err := server.New(ctx, brokertest.Config(t.TempDir()), log)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("logged on a clean stop: %s", line)
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A metadata log cut at start (a torn tail, or bytes damaged after the last
// good record) is said at warn with the file and what was dropped, and what
// came before it is kept.
func TestMetadataRepairIsLogged(t *testing.T) {
	ctx := context.Background()
	cfg := brokertest.Config(t.TempDir())
	b, err := server.New(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Meta().PutVhost(ctx, meta.Vhost{Name: "kept"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The metadata's log is the node's Raft log store: damage the tail of
	// its newest segment as a crash mid-write would.
	segs, err := filepath.Glob(filepath.Join(cfg.DataDir, "raft", "*.wlog"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no raft log segment: %v", err)
	}
	file := segs[len(segs)-1]
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0, 0, 0, 9, 1, 2, 3}); err != nil { // a record header cut short
		t.Fatal(err)
	}
	f.Close()

	logs, log := logcapture.New()
	b, err = server.New(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown(ctx)
	if _, ok := b.Meta().Vhost("kept"); !ok {
		t.Fatal("vhost written before the damage is gone")
	}
	for _, l := range logs.Lines(slog.LevelWarn) {
		if strings.HasPrefix(l.Msg, "logstore: cutting a torn tail") && l.Attrs["file"] == file && l.Attrs["bytes"] == "7" {
			return
		}
	}
	t.Fatalf("no warn naming %s and the 7 bytes dropped; warns: %v", file, logs.Lines(slog.LevelWarn))
}
