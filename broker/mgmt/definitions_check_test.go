package mgmt_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
)

// goodDefinitions is a document every part of which imports: a new vhost,
// a user with its permissions, a policy, exchanges, queues and bindings.
func goodDefinitions() map[string]any {
	return map[string]any{
		"users":       []any{map[string]any{"name": "importer", "password_hash": "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR", "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []any{}}},
		"vhosts":      []any{map[string]any{"name": "imported"}},
		"permissions": []any{map[string]any{"user": "importer", "vhost": "imported", "configure": ".*", "write": ".*", "read": ".*"}},
		"policies":    []any{map[string]any{"vhost": "imported", "name": "cap", "pattern": "^q", "apply-to": "queues", "definition": map[string]any{"max-length": 10}, "priority": 0}},
		"exchanges": []any{
			map[string]any{"name": "orders", "vhost": "imported", "type": "topic", "durable": true},
			map[string]any{"name": "audit", "vhost": "imported", "type": "fanout", "durable": true},
		},
		"queues": []any{
			map[string]any{"name": "q1", "vhost": "imported", "durable": true, "arguments": map[string]any{}},
			map[string]any{"name": "q2", "vhost": "imported", "durable": true, "arguments": map[string]any{"x-max-length": 100}},
		},
		"bindings": []any{
			map[string]any{"source": "orders", "vhost": "imported", "destination": "q1", "destination_type": "queue", "routing_key": "#", "arguments": map[string]any{}},
			map[string]any{"source": "orders", "vhost": "imported", "destination": "audit", "destination_type": "exchange", "routing_key": "#", "arguments": map[string]any{}},
		},
	}
}

// withItem is goodDefinitions with item put in the middle of section.
func withItem(section string, item map[string]any) map[string]any {
	d := goodDefinitions()
	list, _ := d[section].([]any)
	if len(list) == 0 {
		d[section] = []any{item}
		return d
	}
	d[section] = append([]any{list[0], item}, list[1:]...)
	return d
}

// withQuorumDefault is goodDefinitions whose new vhost makes quorum queues
// by default: its queues without a type would be quorum queues.
func withQuorumDefault() map[string]any {
	d := goodDefinitions()
	d["vhosts"] = []any{map[string]any{"name": "imported", "default_queue_type": "quorum"}}
	return d
}

var badDefinitions = []struct {
	name string
	doc  map[string]any
	// want is what the error must say: the item refused.
	want string
}{
	{"unsupported queue type", withItem("queues", map[string]any{"name": "odd", "vhost": "imported", "durable": true, "arguments": map[string]any{"x-queue-type": "delayed"}}), "queues[1] 'odd' in vhost 'imported'"},
	{"quorum queue (not supported yet)", withItem("queues", map[string]any{"name": "qq", "vhost": "imported", "durable": true, "type": "quorum"}), "queues[1] 'qq' in vhost 'imported'"},
	{"queue of a vhost whose default type is quorum", withQuorumDefault(), "queues[0] 'q1' in vhost 'imported'"},
	{"unsupported exchange type", withItem("exchanges", map[string]any{"name": "later", "vhost": "imported", "type": "x-delayed-message", "durable": true}), "exchanges[1] 'later' in vhost 'imported'"},
	{"unsupported password hashing", withItem("users", map[string]any{"name": "legacy", "password_hash": "abc", "hashing_algorithm": "rabbit_password_hashing_md5", "tags": ""}), "users[1] 'legacy'"},
	{"binding to a queue nowhere", withItem("bindings", map[string]any{"source": "orders", "vhost": "imported", "destination": "missing", "destination_type": "queue", "routing_key": "k"}), "bindings[1] 'orders' -> queue 'missing' in vhost 'imported'"},
	{"queue in a vhost nowhere", withItem("queues", map[string]any{"name": "lost", "vhost": "nowhere", "durable": true}), "queues[1] 'lost' in vhost 'nowhere'"},
	{"permission of a user nowhere", withItem("permissions", map[string]any{"user": "ghost", "vhost": "imported", "configure": ".*", "write": ".*", "read": ".*"}), "permissions[1] of 'ghost' in vhost 'imported'"},
	{"queue inequivalent to an existing one", withItem("queues", map[string]any{"name": "existing", "vhost": "/", "durable": false}), "queues[1] 'existing' in vhost '/'"},
	{"topic permissions", withItem("topic_permissions", map[string]any{"user": "importer", "vhost": "imported", "exchange": "amq.topic", "write": ".*", "read": ".*"}), "topic_permissions[0]"},
}

// definitionsSnapshot is everything the broker defines, item by item,
// sorted, to compare before and after an import.
func definitionsSnapshot(a api) []string {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(a.must("GET", "/api/definitions", nil, 200), &doc); err != nil {
		a.t.Fatal(err)
	}
	var out []string
	for _, section := range []string{"users", "vhosts", "permissions", "policies", "queues", "exchanges", "bindings"} {
		var items []json.RawMessage
		_ = json.Unmarshal(doc[section], &items)
		for _, it := range items {
			out = append(out, section+" "+string(it))
		}
	}
	sort.Strings(out)
	return out
}

// TestDefinitionsImportIsAllOrNothing: a document with one item the broker
// refuses, in the middle of good ones, changes nothing and the error names
// that item, over POST /api/definitions and warren ctl import-definitions.
func TestDefinitionsImportIsAllOrNothing(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	a.must("PUT", "/api/queues/%2F/existing", map[string]any{"durable": true}, 201)
	before := definitionsSnapshot(a)
	bin := brokertest.BuildWarren(t)
	for _, tt := range badDefinitions {
		t.Run(tt.name+" over HTTP", func(t *testing.T) {
			a := newAPI(t, n)
			code, body := a.do("POST", "/api/definitions", tt.doc)
			if code != 400 || !strings.Contains(string(body), tt.want) {
				t.Fatalf("POST /api/definitions: %d %s, want 400 naming %q", code, body, tt.want)
			}
			if after := definitionsSnapshot(a); !reflect.DeepEqual(after, before) {
				t.Fatalf("a refused import changed the definitions:\nbefore %v\nafter  %v", before, after)
			}
		})
		t.Run(tt.name+" with warren ctl", func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "definitions.json")
			data, _ := json.Marshal(tt.doc)
			if err := os.WriteFile(file, data, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "ctl", "--url", n.HTTPURL(), "import-definitions", file).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Fatalf("warren ctl import-definitions: %v %s, want a failure naming %q", err, out, tt.want)
			}
			if after := definitionsSnapshot(newAPI(t, n)); !reflect.DeepEqual(after, before) {
				t.Fatalf("a refused import changed the definitions:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	// The same document without the bad item imports whole.
	a.must("POST", "/api/definitions", goodDefinitions(), 204)
	if got := len(a.list("/api/bindings/imported")); got != 2+2 {
		t.Fatalf("bindings in the imported vhost: %d, want 2 and the default exchange's 2", got)
	}
}
