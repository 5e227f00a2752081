package server_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/server"
)

// TestProbeSecondBrokerOnDataDirExits runs a broker process, then a second
// one on the same data directory: the second exits non-zero naming the
// holder, without ever starting. After the first is killed with SIGKILL, a
// new process takes the directory and has the first one's message.
func TestProbeSecondBrokerOnDataDirExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the warren binary")
	}
	bin := brokertest.BuildWarren(t)
	dir := t.TempDir()
	first := startProcess(t, bin, dir)
	publishConfirmed(t, first.url(), "held", "before the kill")

	second := brokertest.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--data-dir", dir,
		"--set", fmt.Sprintf("amqp.listen=127.0.0.1:%d", second), "--set", "http.listen=127.0.0.1:0",
		"--set", "prometheus.listen=127.0.0.1:0", "--set", "stream.listen=127.0.0.1:0").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("second broker on %s: err %v, want a non-zero exit; output:\n%s", dir, err, out)
	}
	want := fmt.Sprintf("data directory %s is in use by pid %d (host ", dir, first.Cmd.Process.Pid)
	if !strings.Contains(string(out), want) {
		t.Fatalf("second broker's output does not name the holder (%q):\n%s", want, out)
	}
	if strings.Contains(string(out), "warren started") {
		t.Fatalf("second broker started:\n%s", out)
	}

	first.Kill()
	third := startProcess(t, bin, dir)
	conn, err := amqp091.Dial(third.url())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := getWait(ch, "held")
	if err != nil || !ok || string(d.Body) != "before the kill" {
		t.Fatalf("after kill -9 and restart: get %q, %v, %v; want the confirmed message", d.Body, ok, err)
	}
}

// TestNewRefusesLockedDataDir checks an in-process node refuses a data
// directory another node of the same process holds, and takes it once
// that node has shut down.
func TestNewRefusesLockedDataDir(t *testing.T) {
	n := brokertest.Start(t)
	_, err := server.New(context.Background(), n.Cfg, nil)
	if !errors.Is(err, server.ErrDataDirInUse) {
		t.Fatalf("second node on %s: %v, want ErrDataDirInUse", n.Cfg.DataDir, err)
	}
	n.Restart()
}

func publishConfirmed(t *testing.T, url, queue, body string) {
	t.Helper()
	conn, err := amqp091.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirm("", queue, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)})
	if err != nil || !dc.Wait() {
		t.Fatalf("publish: %v", err)
	}
}
