package meta

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

// sampleDefinitions is a definitions export in RabbitMQ 3.10's format,
// written by hand from the RabbitMQ documentation. guest's password_hash is
// rabbit_password_hashing_sha256 of "guest" with salt 5F1E2D3C, computed
// independently (Python hashlib).
const sampleDefinitions = `{
  "rabbit_version": "3.10.8",
  "rabbitmq_version": "3.10.8",
  "product_name": "RabbitMQ",
  "product_version": "3.10.8",
  "users": [
    {"name": "guest", "password_hash": "Xx4tPEo9kahhx0ZvBP7ndR/CZldqFoAvFOt2v8xGjAMtQhQt",
     "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"], "limits": {}},
    {"name": "legacy", "password_hash": "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR",
     "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": "monitoring,management"}
  ],
  "vhosts": [
    {"name": "/", "limits": [], "metadata": {"description": "Default virtual host", "tags": []}},
    {"name": "orders", "metadata": {"description": "orders", "tags": [], "default_queue_type": "quorum"}}
  ],
  "permissions": [
    {"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
    {"user": "legacy", "vhost": "orders", "configure": "", "write": "^orders\\.", "read": ".*"}
  ],
  "topic_permissions": [],
  "parameters": [],
  "global_parameters": [{"name": "cluster_name", "value": "rabbit@localhost"}],
  "policies": [
    {"vhost": "orders", "name": "ttl", "pattern": "^ttl\\.", "apply-to": "queues",
     "definition": {"message-ttl": 60000, "max-length": 1000}, "priority": 1}
  ],
  "queues": [
    {"name": "ttl.q", "vhost": "orders", "durable": true, "auto_delete": false, "arguments": {"x-queue-type": "quorum"}},
    {"name": "plain", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {"x-max-length": 10}}
  ],
  "exchanges": [
    {"name": "events", "vhost": "orders", "type": "topic", "durable": true, "auto_delete": false, "internal": false,
     "arguments": {"alternate-exchange": "amq.fanout"}}
  ],
  "bindings": [
    {"source": "events", "vhost": "orders", "destination": "ttl.q", "destination_type": "queue",
     "routing_key": "eu.#", "arguments": {}}
  ]
}`

func TestDefinitionsImportExportRoundTrip(t *testing.T) {
	ctx := context.Background()
	var d Definitions
	must(t, json.Unmarshal([]byte(sampleDefinitions), &d))
	s := openT(t, t.TempDir())
	must(t, Import(ctx, s, d))

	guest, ok := s.User("guest")
	if !ok || !guest.CheckPassword("guest") || guest.CheckPassword("Guest") || !guest.HasTag("administrator") {
		t.Fatalf("guest imported wrong: %+v", guest)
	}
	legacy, _ := s.User("legacy")
	if !legacy.CheckPassword("test12") || !reflect.DeepEqual(legacy.Tags, []string{"monitoring", "management"}) {
		t.Fatalf("legacy user (comma tags, RabbitMQ docs' hash of test12) imported wrong: %+v", legacy)
	}
	if v, _ := s.Vhost("orders"); v.DefaultQueueType != "quorum" || v.Description != "orders" {
		t.Fatalf("vhost metadata lost: %+v", v)
	}
	if qs := s.Queues("orders"); len(qs) != 1 || qs[0].Type != "quorum" {
		t.Fatalf("queue type from x-queue-type: %+v", qs)
	}
	if p, ok := MatchPolicy(s.Policies("orders"), "ttl.q", "quorum"); !ok || p.Definition["message-ttl"] != int64(60000) {
		t.Fatalf("policy: %+v %v", p, ok)
	}

	// Export, serialize, import into a fresh store, export again: equal.
	out := Export(s, "")
	raw, err := json.Marshal(out)
	must(t, err)
	var keys map[string]json.RawMessage
	must(t, json.Unmarshal(raw, &keys))
	for _, k := range []string{"users", "vhosts", "permissions", "policies", "queues", "exchanges", "bindings"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("export lacks RabbitMQ key %q", k)
		}
	}
	var users []map[string]any
	must(t, json.Unmarshal(keys["users"], &users))
	for _, u := range users {
		if u["hashing_algorithm"] != "rabbit_password_hashing_sha256" || u["password_hash"] == "" {
			t.Errorf("exported user lacks RabbitMQ hash fields: %v", u)
		}
	}
	var back Definitions
	must(t, json.Unmarshal(raw, &back))
	s2 := openT(t, t.TempDir())
	must(t, Import(ctx, s2, back))
	if a, b := dumpOf(s), dumpOf(s2); !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip differs:\n%+v\n%+v", a, b)
	}
	if g, _ := s2.User("guest"); !g.CheckPassword("guest") {
		t.Fatal("guest password lost in round trip")
	}

	// One vhost only: no users, only that vhost's things.
	one := Export(s, "orders")
	if len(one.Users) != 0 || len(one.Vhosts) != 1 || len(one.Queues) != 1 || len(one.Permissions) != 1 {
		t.Fatalf("vhost export: %+v", one)
	}
}

func TestImportRejectsUnknownHashing(t *testing.T) {
	s := openT(t, t.TempDir())
	d := Definitions{Users: []DefUser{{Name: "x", PasswordHash: "abc", HashingAlgorithm: "rabbit_password_hashing_md5"}}}
	if err := Import(context.Background(), s, d); err == nil {
		t.Fatal("md5 hashing accepted")
	}
}
