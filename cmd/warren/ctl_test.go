package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// runCtl runs `warren ctl ARGS` against a node and returns what it printed
// and its error (non-nil: warren exits non-zero).
func runCtl(t *testing.T, n *brokertest.Node, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"ctl", "--url", n.HTTPURL()}, args...))
	err = root.Execute()
	return out.String(), errb.String(), err
}

// A bare `warren ctl list` (or an unknown kind) fails saying which kinds
// exist.
func TestCtlListNamesItsKinds(t *testing.T) {
	n := brokertest.Start(t)
	for _, args := range [][]string{{"list"}, {"list", "queuez"}, {"list", "queues", "users"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, stderr, err := runCtl(t, n, args...)
			if err == nil {
				t.Fatal("succeeded")
			}
			for _, k := range ctlKinds() {
				if !strings.Contains(stderr, k.name) || !strings.Contains(err.Error(), k.name) {
					t.Errorf("does not name kind %q: %v\n%s", k.name, err, stderr)
				}
			}
		})
	}
	out, _, err := runCtl(t, n, "list", "vhosts")
	if err != nil || !strings.Contains(out, "name") || !strings.Contains(out, "/") {
		t.Fatalf("list vhosts: %v\n%s", err, out)
	}
}

// Each write command says what it does, as rabbitmqctl does, and does it;
// --quiet keeps it silent.
func TestCtlWriteCommandsSayWhatTheyDo(t *testing.T) {
	n := brokertest.Start(t)
	dir := t.TempDir()
	defs := filepath.Join(dir, "defs.json")
	imported := filepath.Join(dir, "import.json")
	if err := os.WriteFile(imported, []byte(`{"vhosts":[{"name":"imported"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args  []string
		say   string
		check func() bool
	}{
		{[]string{"add-vhost", "v1"}, `Adding vhost "v1" ...`, func() bool { return n.API(t, "GET", "/api/vhosts/v1", nil, nil) == 200 }},
		{[]string{"add-user", "app", "pw", "--tags", "monitoring"}, `Adding user "app" ...`, func() bool { return n.API(t, "GET", "/api/users/app", nil, nil) == 200 }},
		{[]string{"set-permissions", "v1", "app", ".*", ".*", ".*"}, `Setting permissions for user "app" in vhost "v1" ...`,
			func() bool { return n.API(t, "GET", "/api/permissions/v1/app", nil, nil) == 200 }},
		{[]string{"set-vhost-storage", "v1", "--queue-version", "1"}, `Setting the storage of vhost "v1" to `, func() bool {
			var v struct {
				Storage map[string]any `json:"storage"`
			}
			return n.API(t, "GET", "/api/vhosts/v1", nil, &v) == 200 && v.Storage["queue-version"] == float64(1)
		}},
		{[]string{"export-definitions", defs}, `Exporting definitions in JSON to a file at "` + defs + `" ...`, func() bool {
			b, err := os.ReadFile(defs)
			return err == nil && bytes.Contains(b, []byte(`"v1"`))
		}},
		{[]string{"import-definitions", imported}, `Importing definitions in JSON from a file at "` + imported + `" ...`,
			func() bool { return n.API(t, "GET", "/api/vhosts/imported", nil, nil) == 200 }},
		{[]string{"delete-vhost", "v1"}, `Deleting vhost "v1" ...`, func() bool { return n.API(t, "GET", "/api/vhosts/v1", nil, nil) == 404 }},
	}
	for _, s := range steps {
		out, stderr, err := runCtl(t, n, s.args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", s.args, err, stderr)
		}
		if !strings.HasPrefix(out, s.say) {
			t.Errorf("%v printed %q, want %q", s.args, out, s.say)
		}
		if !s.check() {
			t.Errorf("%v: not done", s.args)
		}
	}

	conn := n.Dial(t)
	var conns []struct{ Name string }
	// Listed once Dial returns: the broker lists a connection before it
	// writes open-ok (amqp's handshake).
	if code := n.API(t, "GET", "/api/connections", nil, &conns); code != 200 || len(conns) != 1 {
		t.Fatalf("GET /api/connections right after Dial: %d %v", code, conns)
	}
	out, _, err := runCtl(t, n, "close-connection", conns[0].Name)
	if err != nil || out != `Closing connection "`+conns[0].Name+`" ...`+"\n" {
		t.Errorf("close-connection printed %q (%v)", out, err)
	}
	eventually.True(t, 5*time.Second, "the connection is closed", conn.IsClosed)

	out, _, err = runCtl(t, n, "--quiet", "add-vhost", "v2")
	if err != nil || out != "" {
		t.Errorf("--quiet add-vhost printed %q (%v)", out, err)
	}
}
