package mgmt_test

import (
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// names lists the values of key (and vhost, when it is there) in a listing.
func names(rows []map[string]any, key string) []string {
	out := []string{}
	for _, r := range rows {
		s, _ := r[key].(string)
		if vh, ok := r["vhost"].(string); ok && key != "vhost" {
			s = vh + "/" + s
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// A user's lists show what RabbitMQ shows it: objects of the vhosts it has
// access to (every vhost for an administrator), every vhost's name for a
// monitoring user, and its own connections and channels unless it is a
// monitoring user or an administrator.
func TestProbeHTTPListsShowWhatTheUserMaySee(t *testing.T) {
	n := brokertest.Start(t)
	admin := newAPI(t, n)
	for _, vh := range []string{"a", "b"} {
		admin.must("PUT", "/api/vhosts/"+vh, map[string]any{}, 201)
		admin.must("PUT", "/api/queues/"+vh+"/q-"+vh, map[string]any{}, 201)
		admin.must("PUT", "/api/exchanges/"+vh+"/x-"+vh, map[string]any{"type": "fanout"}, 201)
		admin.must("POST", "/api/bindings/"+vh+"/e/x-"+vh+"/q/q-"+vh, map[string]any{}, 201)
		admin.must("PUT", "/api/policies/"+vh+"/p-"+vh, map[string]any{"pattern": "^none$", "definition": map[string]any{"max-length": 1}}, 201)
	}
	for _, u := range []string{"mgr", "mon"} {
		tag := map[string]string{"mgr": "management", "mon": "monitoring"}[u]
		admin.must("PUT", "/api/users/"+u, map[string]any{"password": "pw", "tags": tag}, 201)
		admin.must("PUT", "/api/permissions/a/"+u, map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, 201)
	}
	// A connection and channel each for guest (on /) and mgr (on a).
	n.Channel(t)
	conn, err := amqp091.Dial(n.URLFor("mgr", "pw", "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Channel(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, "both channels are listed", func() bool { return len(admin.list("/api/channels")) == 2 })

	all := func(name string) []string { return names(admin.list("/api/"+name), "name") }
	onlyA := func(name string) []string {
		var out []string
		for _, s := range all(name) {
			if strings.HasPrefix(s, "a/") {
				out = append(out, s)
			}
		}
		return out
	}
	tests := []struct {
		user, path, key string
		want            []string
	}{
		{"mgr", "/api/vhosts", "name", []string{"a"}},
		{"mon", "/api/vhosts", "name", []string{"/", "a", "b"}},
		{"guest", "/api/vhosts", "name", []string{"/", "a", "b"}},
		{"mgr", "/api/queues", "name", onlyA("queues")},
		{"mon", "/api/queues", "name", onlyA("queues")},
		{"guest", "/api/queues", "name", all("queues")},
		{"mgr", "/api/exchanges", "name", onlyA("exchanges")},
		{"mon", "/api/exchanges", "name", onlyA("exchanges")},
		{"mgr", "/api/bindings", "destination", names(filterVhost(admin.list("/api/bindings"), "a"), "destination")},
		{"mgr", "/api/policies", "name", []string{"a/p-a"}},
		{"guest", "/api/policies", "name", []string{"a/p-a", "b/p-b"}},
		{"mgr", "/api/connections", "user", []string{"a/mgr"}},
		{"mon", "/api/connections", "user", []string{"//guest", "a/mgr"}},
		{"mgr", "/api/channels", "user", []string{"a/mgr"}},
		{"mon", "/api/channels", "user", []string{"//guest", "a/mgr"}},
	}
	for _, tt := range tests {
		t.Run(tt.user+tt.path, func(t *testing.T) {
			a := api{t: t, base: n.HTTPURL(), user: tt.user, pass: "pw"}
			if tt.user == "guest" {
				a.pass = "guest"
			}
			if got := names(a.list(tt.path), tt.key); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("%s as %s = %v, want %v", tt.path, tt.user, got, tt.want)
			}
		})
	}

	// The overview counts what the user sees.
	mgr := api{t: t, base: n.HTTPURL(), user: "mgr", pass: "pw"}
	var ov struct {
		ObjectTotals map[string]float64 `json:"object_totals"`
		Listeners    []any              `json:"listeners"`
	}
	if err := json.Unmarshal(mgr.must("GET", "/api/overview", nil, 200), &ov); err != nil {
		t.Fatal(err)
	}
	if ov.ObjectTotals["queues"] != 1 || ov.ObjectTotals["connections"] != 1 || ov.ObjectTotals["channels"] != 1 || ov.Listeners != nil {
		t.Fatalf("mgr's overview = %+v, want 1 queue, 1 connection, 1 channel, no listeners", ov)
	}
	// Another user's connection: not mgr's to see or close.
	guestConn := names(filterUser(admin.list("/api/connections"), "guest"), "name")[0]
	guestConn = strings.TrimPrefix(guestConn, "//")
	mgr.must("GET", "/api/connections/"+url.PathEscape(guestConn), nil, 401)
	mgr.must("DELETE", "/api/connections/"+url.PathEscape(guestConn), nil, 401)
	mon := api{t: t, base: n.HTTPURL(), user: "mon", pass: "pw"}
	mon.must("GET", "/api/connections/"+url.PathEscape(guestConn), nil, 200)
	mon.must("DELETE", "/api/connections/"+url.PathEscape(guestConn), nil, 401)
	mgrConn := strings.TrimPrefix(names(filterUser(admin.list("/api/connections"), "mgr"), "name")[0], "a/")
	mgr.must("DELETE", "/api/connections/"+url.PathEscape(mgrConn), nil, 204)
}

func filterVhost(rows []map[string]any, vh string) []map[string]any {
	var out []map[string]any
	for _, r := range rows {
		if r["vhost"] == vh {
			out = append(out, r)
		}
	}
	return out
}

func filterUser(rows []map[string]any, user string) []map[string]any {
	var out []map[string]any
	for _, r := range rows {
		if r["user"] == user {
			out = append(out, r)
		}
	}
	return out
}

// A user's writes in a vhost follow its permission patterns exactly as
// over AMQP, whatever its tag; and a vhost it has no access to is refused
// outright.
func TestProbeHTTPWritesFollowPermissionPatterns(t *testing.T) {
	n := brokertest.Start(t)
	admin := newAPI(t, n)
	admin.must("PUT", "/api/vhosts/a", map[string]any{}, 201)
	admin.must("PUT", "/api/vhosts/b", map[string]any{}, 201)
	admin.must("PUT", "/api/queues/a/other", map[string]any{}, 201)
	admin.must("PUT", "/api/queues/b/other", map[string]any{}, 201)
	admin.must("PUT", "/api/users/pm", map[string]any{"password": "pw", "tags": "policymaker"}, 201)
	admin.must("PUT", "/api/permissions/a/pm", map[string]any{"configure": "^pm-", "write": "^pm-", "read": "^pm-"}, 201)
	pm := api{t: t, base: n.HTTPURL(), user: "pm", pass: "pw"}
	tests := []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"declare a queue inside configure", "PUT", "/api/queues/a/pm-q", map[string]any{}, 201},
		{"declare a queue outside configure", "PUT", "/api/queues/a/other2", map[string]any{}, 401},
		{"declare an exchange inside configure", "PUT", "/api/exchanges/a/pm-x", map[string]any{"type": "fanout"}, 201},
		{"declare an exchange outside configure", "PUT", "/api/exchanges/a/other-x", map[string]any{"type": "fanout"}, 401},
		{"dead-letter exchange outside write", "PUT", "/api/queues/a/pm-dl", map[string]any{"arguments": map[string]any{"x-dead-letter-exchange": "amq.fanout"}}, 401},
		{"dead-letter exchange inside write", "PUT", "/api/queues/a/pm-dl", map[string]any{"arguments": map[string]any{"x-dead-letter-exchange": "pm-x"}}, 201},
		{"alternate exchange outside write", "PUT", "/api/exchanges/a/pm-ae", map[string]any{"type": "direct", "arguments": map[string]any{"alternate-exchange": "amq.fanout"}}, 401},
		{"bind inside write and read", "POST", "/api/bindings/a/e/pm-x/q/pm-q", map[string]any{}, 201},
		{"bind from an exchange outside read", "POST", "/api/bindings/a/e/amq.fanout/q/pm-q", map[string]any{}, 401},
		{"bind to a queue outside write", "POST", "/api/bindings/a/e/pm-x/q/other", map[string]any{}, 401},
		{"purge outside read", "DELETE", "/api/queues/a/other/contents", nil, 401},
		{"purge inside read", "DELETE", "/api/queues/a/pm-q/contents", nil, 204},
		{"get outside read", "POST", "/api/queues/a/other/get", map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}, 401},
		{"publish outside write", "POST", "/api/exchanges/a/amq.default/publish", map[string]any{"routing_key": "other", "payload": "x", "payload_encoding": "string"}, 401},
		{"delete a queue outside configure", "DELETE", "/api/queues/a/other", nil, 401},
		{"aliveness outside configure", "GET", "/api/aliveness-test/a", nil, 401},
		{"set a policy where it has access", "PUT", "/api/policies/a/cap", map[string]any{"pattern": "^pm-", "definition": map[string]any{"max-length": 10}}, 201},
		{"declare in a vhost without access", "PUT", "/api/queues/b/pm-q", map[string]any{}, 401},
		{"purge in a vhost without access", "DELETE", "/api/queues/b/other/contents", nil, 401},
		{"set a policy in a vhost without access", "PUT", "/api/policies/b/cap", map[string]any{"pattern": "^pm-", "definition": map[string]any{"max-length": 10}}, 401},
		{"bind in a vhost without access", "POST", "/api/bindings/b/e/amq.fanout/q/other", map[string]any{}, 401},
		{"list queues of a vhost without access", "GET", "/api/queues/b", nil, 401},
		{"delete a queue inside configure", "DELETE", "/api/queues/a/pm-dl", nil, 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pm.must(tt.method, tt.path, tt.body, tt.want)
		})
	}
	// Nothing refused happened.
	if got := names(admin.list("/api/queues/a"), "name"); strings.Join(got, ",") != "a/other,a/pm-q" {
		t.Fatalf("queues in a = %v", got)
	}
	// An administrator without permissions in a vhost lists it, but acts in
	// it only through permissions, as RabbitMQ's administrators do.
	admin.must("DELETE", "/api/permissions/b/guest", nil, 204)
	admin.must("GET", "/api/queues/b", nil, 200)
	admin.must("PUT", "/api/queues/b/q2", map[string]any{}, 401)
	admin.must("DELETE", "/api/queues/b/other/contents", nil, 401)
}
