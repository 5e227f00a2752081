package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
)

// run executes warren-perf with args and returns its JSON result.
func run(t *testing.T, args ...string) result {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "--json", "-", "--progress", "0"))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("warren-perf %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("result %q: %v", lines[len(lines)-1], err)
	}
	if !strings.HasPrefix(lines[0], r.Mode+" "+r.Target+": ") {
		t.Fatalf("summary line %q", lines[0])
	}
	return r
}

func TestStreamFillConsume(t *testing.T) {
	n := brokertest.Start(t)
	uri := n.StreamURI()
	fill := run(t, "stream", "fill", "--uri", uri, "--stream", "s", "--messages", "3000", "--chunk", "300", "--size", "12")
	if fill.Messages != 3000 || fill.Chunks != 10 || fill.Bytes != 36000 || fill.Error != "" {
		t.Fatalf("fill: %+v", fill)
	}
	// The consumer sees exactly the chunks the filler wrote.
	for _, decode := range []string{"true", "false"} {
		c := run(t, "stream", "consume", "--uri", uri, "--stream", "s", "--decode="+decode)
		if c.Messages != 3000 || c.Chunks != 10 || c.Error != "" {
			t.Fatalf("consume (decode %s): %+v", decode, c)
		}
	}
	c := run(t, "stream", "consume", "--uri", uri, "--stream", "s", "--offset", "2950", "--messages", "50", "--deliver-v2")
	if c.Messages != 50 {
		t.Fatalf("consume from offset: %+v", c)
	}
	a := run(t, "amqp", "consume", "--uri", n.URL(), "--queue", "s", "--stream-offset", "first", "--qos", "200", "--messages", "3000")
	if a.Messages != 3000 || a.Bytes != 36000 {
		t.Fatalf("amqp consume of the stream: %+v", a)
	}
	p := run(t, "stream", "publish", "--uri", uri, "--stream", "p", "--messages", "10000", "--batch", "100")
	if p.Messages != 10000 || p.Error != "" {
		t.Fatalf("stream publish: %+v", p)
	}
	q := run(t, "amqp", "publish", "--uri", n.URL(), "--queue", "q", "--declare", "classic", "--messages", "2000")
	if q.Messages != 2000 || q.Error != "" {
		t.Fatalf("amqp publish: %+v", q)
	}
	qc := run(t, "amqp", "consume", "--uri", n.URL(), "--queue", "q", "--messages", "2000")
	if qc.Messages != 2000 {
		t.Fatalf("amqp consume of the queue: %+v", qc)
	}
}

// runErr executes warren-perf with args and returns its error and output.
func runErr(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "--json", "-", "--progress", "0"))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// The wire consumer reads what amqp091-go reads: a stream from its first
// offset, a classic queue, bodies split over several frames; it ends on
// --messages or when idle, and reports the broker's refusals.
func TestAMQPConsumeWireClient(t *testing.T) {
	n := brokertest.Start(t)
	fill := run(t, "stream", "fill", "--uri", n.StreamURI(), "--stream", "s", "--messages", "3000", "--chunk", "1", "--size", "12", "--window", "100")
	if fill.Messages != 3000 || fill.Error != "" {
		t.Fatalf("fill: %+v", fill)
	}
	run(t, "amqp", "publish", "--uri", n.URL(), "--queue", "big", "--declare", "classic", "--messages", "20", "--size", "300000")
	for _, tc := range []struct {
		name          string
		args          []string
		msgs, bytesIn int64
	}{
		{"stream-to-messages", []string{"--queue", "s", "--stream-offset", "first", "--qos", "200", "--messages", "3000"}, 3000, 36000},
		{"stream-until-idle", []string{"--queue", "s", "--stream-offset", "first", "--qos", "7", "--idle", "300ms"}, 3000, 36000},
		{"stream-from-offset", []string{"--queue", "s", "--stream-offset", "2990", "--qos", "200", "--messages", "10"}, 10, 120},
		{"bodies-over-frames", []string{"--queue", "big", "--qos", "5", "--messages", "20"}, 20, 20 * 300000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append([]string{"amqp", "consume", "--uri", n.URL(), "--client", "wire"}, tc.args...)...)
			if r.Messages != tc.msgs || r.Bytes != tc.bytesIn || r.Error != "" {
				t.Fatalf("got %d messages, %d bytes, error %q; want %d, %d", r.Messages, r.Bytes, r.Error, tc.msgs, tc.bytesIn)
			}
		})
	}
	// --duration ends a read that has not reached the end: a clean stop
	// (its last acks may meet the socket already shut), not an error.
	t.Run("stream-for-a-duration", func(t *testing.T) {
		fill := run(t, "stream", "fill", "--uri", n.StreamURI(), "--stream", "long", "--messages", "1000000", "--chunk", "1000", "--size", "12", "--window", "100")
		if fill.Messages != 1000000 || fill.Error != "" {
			t.Fatalf("fill: %+v", fill)
		}
		r := run(t, "amqp", "consume", "--uri", n.URL(), "--client", "wire", "--queue", "long", "--stream-offset", "first", "--duration", "50ms")
		if r.Messages <= 0 || r.Messages >= 1000000 || r.Error != "" {
			t.Fatalf("got %d messages, error %q; want some of the 1,000,000 and no error", r.Messages, r.Error)
		}
	})
	// The classic queue was acked to the end: nothing is left in it.
	if r := run(t, "amqp", "consume", "--uri", n.URL(), "--queue", "big", "--client", "wire", "--idle", "200ms"); r.Messages != 0 {
		t.Fatalf("%d messages left in the acked queue", r.Messages)
	}
	for _, tc := range []struct {
		name, uri, queue, want string
	}{
		{"no-such-queue", n.URL(), "missing", "404"},
		{"wrong-password", strings.Replace(n.URL(), "guest:guest", "guest:wrong", 1), "s", "403"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runErr("amqp", "consume", "--uri", tc.uri, "--queue", tc.queue, "--client", "wire", "--idle", "1s")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q\n%s", err, tc.want, out)
			}
		})
	}
}

func TestAMQPDeclare(t *testing.T) {
	c := brokertest.StartCluster(t, 3)
	// Declares on a follower of the metadata group are forwarded to the
	// leader and answered once committed and applied here.
	r := run(t, "amqp", "declare", "--uri", c.Nodes[2].URL(), "--queue", "d", "--connections", "4", "--messages", "200")
	if r.Messages != 200 || r.Error != "" {
		t.Fatalf("declare: %+v", r)
	}
	for _, q := range c.Nodes[2].Meta().Queues("/") {
		if strings.HasPrefix(q.Name, "d-") {
			t.Fatalf("queue %s left after the run", q.Name)
		}
	}
	k := run(t, "amqp", "declare", "--uri", c.Nodes[0].URL(), "--queue", "k", "--connections", "2", "--messages", "10", "--keep")
	if k.Messages != 10 || len(c.Nodes[0].Meta().Queues("/")) != 10 {
		t.Fatalf("declare --keep: %+v, %d queues", k, len(c.Nodes[0].Meta().Queues("/")))
	}
}
