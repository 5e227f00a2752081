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
