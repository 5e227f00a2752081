package mgmt_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/mgmt"
	"github.com/warrenmq/warren/broker/server"
)

// expect is what RabbitMQ's management plugin asks of a caller on a route,
// written down here from its source (rabbit_mgmt_wm_*:is_authorized and
// the AMQP operations behind each write), independently of mgmt's table.
type expect struct {
	// tag is the least tag the route needs: "management" (any management
	// user), "policymaker", "monitoring" or "administrator".
	tag string
	// perms: the route acts in its vhost through the caller's permission
	// patterns, so an administrator without permissions there is refused
	// too.
	perms bool
	// others is the tag that reaches another user's connection on the
	// route ("" when it lists, or is not about connections).
	others string
	body   any
}

// walk has one entry per route of mgmt.Routes(): a route without one fails
// the walk, so none is added unchecked.
var walk = map[string]expect{
	"GET /api/overview":                 {tag: "management"},
	"GET /api/whoami":                   {tag: "management"},
	"GET /api/nodes":                    {tag: "monitoring"},
	"GET /api/nodes/{name}":             {tag: "monitoring"},
	"GET /api/nodes/{name}/memory":      {tag: "monitoring"},
	"GET /api/cluster-name":             {tag: "management"},
	"GET /api/cluster/status":           {tag: "monitoring"},
	"DELETE /api/cluster/nodes/{name}":  {tag: "administrator"},
	"POST /api/cluster/leave":           {tag: "administrator"},
	"POST /api/cluster/join":            {tag: "administrator", body: map[string]any{"address": "127.0.0.1:1"}},
	"POST /api/cluster/drain":           {tag: "administrator"},
	"POST /api/cluster/decommission":    {tag: "administrator"},
	"GET /api/extensions":               {tag: "management"},
	"GET /api/feature-flags":            {tag: "management"},
	"GET /api/deprecated-features":      {tag: "management"},
	"GET /api/deprecated-features/used": {tag: "management"},

	"GET /api/vhosts":                         {tag: "management"},
	"GET /api/vhosts/{vhost}":                 {tag: "administrator"},
	"PUT /api/vhosts/{vhost}":                 {tag: "administrator", body: map[string]any{}},
	"DELETE /api/vhosts/{vhost}":              {tag: "administrator"},
	"GET /api/vhosts/{vhost}/permissions":     {tag: "administrator"},
	"GET /api/vhosts/{vhost}/connections":     {tag: "management"},
	"GET /api/vhost-limits":                   {tag: "management"},
	"GET /api/vhost-limits/{vhost}":           {tag: "management"},
	"PUT /api/vhost-limits/{vhost}/{name}":    {tag: "administrator", body: map[string]any{"value": 10}},
	"DELETE /api/vhost-limits/{vhost}/{name}": {tag: "administrator"},

	"GET /api/users":                        {tag: "administrator"},
	"GET /api/users/{user}":                 {tag: "administrator"},
	"PUT /api/users/{user}":                 {tag: "administrator", body: map[string]any{"password": "pw", "tags": ""}},
	"DELETE /api/users/{user}":              {tag: "administrator"},
	"GET /api/user-limits":                  {tag: "administrator"},
	"GET /api/user-limits/{user}":           {tag: "management", others: "monitoring"},
	"PUT /api/user-limits/{user}/{name}":    {tag: "administrator", body: map[string]any{"value": 10}},
	"DELETE /api/user-limits/{user}/{name}": {tag: "administrator"},

	"GET /api/permissions":                   {tag: "administrator"},
	"GET /api/permissions/{vhost}/{user}":    {tag: "administrator"},
	"PUT /api/permissions/{vhost}/{user}":    {tag: "administrator", body: map[string]any{"configure": "", "write": "", "read": ""}},
	"DELETE /api/permissions/{vhost}/{user}": {tag: "administrator"},

	"GET /api/policies":                   {tag: "management"},
	"GET /api/policies/{vhost}":           {tag: "management"},
	"GET /api/policies/{vhost}/{name}":    {tag: "policymaker"},
	"PUT /api/policies/{vhost}/{name}":    {tag: "policymaker", body: map[string]any{"pattern": "^none$", "definition": map[string]any{"max-length": 5}}},
	"DELETE /api/policies/{vhost}/{name}": {tag: "policymaker"},

	"GET /api/parameters":                               {tag: "policymaker"},
	"GET /api/parameters/{component}":                   {tag: "policymaker"},
	"GET /api/parameters/{component}/{vhost}":           {tag: "policymaker"},
	"GET /api/global-parameters":                        {tag: "policymaker"},
	"PUT /api/parameters/{component}/{vhost}/{name}":    {tag: "policymaker", body: map[string]any{"value": map[string]any{}}},
	"DELETE /api/parameters/{component}/{vhost}/{name}": {tag: "policymaker"},
	"GET /api/operator-policies":                        {tag: "management"},
	"GET /api/operator-policies/{vhost}":                {tag: "management"},
	"PUT /api/operator-policies/{vhost}/{name}":         {tag: "administrator", body: map[string]any{"pattern": "^x$", "definition": map[string]any{}}},
	"DELETE /api/operator-policies/{vhost}/{name}":      {tag: "administrator"},

	"GET /api/queues":                            {tag: "management"},
	"GET /api/queues/{vhost}":                    {tag: "management"},
	"GET /api/queues/{vhost}/{name}":             {tag: "management"},
	"PUT /api/queues/{vhost}/{name}":             {tag: "management", perms: true, body: map[string]any{"durable": false}},
	"DELETE /api/queues/{vhost}/{name}":          {tag: "management", perms: true},
	"DELETE /api/queues/{vhost}/{name}/contents": {tag: "management", perms: true},
	"POST /api/queues/{vhost}/{name}/get":        {tag: "management", perms: true, body: map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}},
	"GET /api/queues/{vhost}/{name}/bindings":    {tag: "management"},

	"GET /api/exchanges":                                {tag: "management"},
	"GET /api/exchanges/{vhost}":                        {tag: "management"},
	"GET /api/exchanges/{vhost}/{name}":                 {tag: "management"},
	"PUT /api/exchanges/{vhost}/{name}":                 {tag: "management", perms: true, body: map[string]any{"type": "fanout", "durable": false}},
	"DELETE /api/exchanges/{vhost}/{name}":              {tag: "management", perms: true},
	"POST /api/exchanges/{vhost}/{name}/publish":        {tag: "management", perms: true, body: map[string]any{"routing_key": "k", "payload": "x", "payload_encoding": "string"}},
	"GET /api/exchanges/{vhost}/{name}/bindings/{side}": {tag: "management"},

	"GET /api/bindings":                                           {tag: "management"},
	"GET /api/bindings/{vhost}":                                   {tag: "management"},
	"GET /api/bindings/{vhost}/e/{exchange}/q/{queue}":            {tag: "management"},
	"POST /api/bindings/{vhost}/e/{exchange}/q/{queue}":           {tag: "management", perms: true, body: map[string]any{"routing_key": "k"}},
	"GET /api/bindings/{vhost}/e/{exchange}/e/{dest}":             {tag: "management"},
	"POST /api/bindings/{vhost}/e/{exchange}/e/{dest}":            {tag: "management", perms: true, body: map[string]any{"routing_key": "k"}},
	"DELETE /api/bindings/{vhost}/e/{exchange}/q/{queue}/{props}": {tag: "management", perms: true},
	"DELETE /api/bindings/{vhost}/e/{exchange}/e/{dest}/{props}":  {tag: "management", perms: true},

	"GET /api/connections":                    {tag: "management"},
	"GET /api/connections/{name}":             {tag: "management", others: "monitoring"},
	"DELETE /api/connections/{name}":          {tag: "management", others: "administrator"},
	"GET /api/connections/username/{user}":    {tag: "management", others: "monitoring"},
	"DELETE /api/connections/username/{user}": {tag: "management", others: "administrator"},
	"GET /api/channels":                       {tag: "management"},
	"GET /api/consumers":                      {tag: "management"},
	"GET /api/consumers/{vhost}":              {tag: "management"},

	"GET /api/definitions":          {tag: "administrator"},
	"POST /api/definitions":         {tag: "administrator", body: map[string]any{}},
	"GET /api/definitions/{vhost}":  {tag: "administrator"},
	"POST /api/definitions/{vhost}": {tag: "administrator", body: map[string]any{}},

	"GET /api/health/checks/alarms":                        {tag: "management"},
	"GET /api/health/checks/local-alarms":                  {tag: "management"},
	"GET /api/health/checks/virtual-hosts":                 {tag: "management"},
	"GET /api/health/checks/port-listener/{port}":          {tag: "management"},
	"GET /api/health/checks/ready":                         {tag: "management"},
	"GET /api/health/checks/protocol-listener/{protocols}": {tag: "management"},
	"GET /api/health/checks/node-is-quorum-critical":       {tag: "management"},
	"GET /api/aliveness-test/{vhost}":                      {tag: "management", perms: true},
}

// hasTag is RabbitMQ's is_mgmt_user / is_policymaker / is_monitor /
// is_admin for a user with the one tag userTag ("" for none).
func hasTag(userTag, need string) bool {
	switch {
	case userTag == "":
		return false
	case userTag == "administrator" || need == "management":
		return true
	}
	return userTag == need
}

// TestProbeHTTPAuthorizationWalk calls every route of the HTTP API (GET
// routes also with HEAD) as a user of every tag, on a vhost where the user
// has permissions (every pattern ".*") and on one where it has none, over
// real HTTP, and checks the answer is a refusal (401 not_authorised)
// exactly where RabbitMQ's model refuses.
func TestProbeHTTPAuthorizationWalk(t *testing.T) {
	n := brokertest.Start(t)
	admin := newAPI(t, n)
	const granted, denied = "granted", "denied"
	for _, vh := range []string{granted, denied} {
		admin.must("PUT", "/api/vhosts/"+vh, map[string]any{}, 201)
		admin.must("PUT", "/api/queues/"+vh+"/q", map[string]any{"durable": false}, 201)
		admin.must("PUT", "/api/exchanges/"+vh+"/x", map[string]any{"type": "direct", "durable": false}, 201)
		admin.must("PUT", "/api/exchanges/"+vh+"/x2", map[string]any{"type": "direct", "durable": false}, 201)
		admin.must("POST", "/api/bindings/"+vh+"/e/x/q/q", map[string]any{"routing_key": "k"}, 201)
		admin.must("POST", "/api/bindings/"+vh+"/e/x/e/x2", map[string]any{"routing_key": "k"}, 201)
		admin.must("PUT", "/api/policies/"+vh+"/p", map[string]any{"pattern": "^none$", "definition": map[string]any{"max-length": 5}}, 201)
	}
	// guest created both vhosts; it keeps its permissions only in granted.
	admin.must("DELETE", "/api/permissions/"+denied+"/guest", nil, 204)
	tags := []string{"", "management", "policymaker", "monitoring", "administrator"}
	for _, tag := range tags {
		name := "u-" + tag
		admin.must("PUT", "/api/users/"+name, map[string]any{"password": "pw", "tags": tag}, 201)
		admin.must("PUT", "/api/permissions/"+granted+"/"+name, map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, 201)
	}
	// A connection of guest's, for the routes about one connection.
	n.Dial(t)
	var conns []map[string]any
	eventually.True(t, 5e9, "guest's connection is listed", func() bool {
		conns = admin.list("/api/connections")
		return len(conns) == 1
	})
	connName := conns[0]["name"].(string)
	httpPort := strconv.Itoa(n.Addr(server.ListenerHTTP).(*net.TCPAddr).Port)

	// The routes that take the node out of service (drain closes its
	// listeners and connections, even as the only member) go last: what
	// the other routes are walked against must still be there.
	outOfService := map[string]bool{"POST /api/cluster/drain": true, "POST /api/cluster/leave": true, "POST /api/cluster/decommission": true, "POST /api/cluster/join": true}
	routes := mgmt.Routes()
	sort.SliceStable(routes, func(i, j int) bool {
		return !outOfService[routes[i].Pattern] && outOfService[routes[j].Pattern]
	})
	walked := map[string]bool{}
	for _, rt := range routes {
		e, ok := walk[rt.Pattern]
		if !ok {
			t.Errorf("route %q is not in the walk: add what RabbitMQ asks of its callers", rt.Pattern)
			continue
		}
		walked[rt.Pattern] = true
		vhosts := []string{""}
		if strings.Contains(rt.Pattern, "{vhost}") {
			vhosts = []string{granted, denied}
		}
		method, pattern, _ := strings.Cut(rt.Pattern, " ")
		methods := []string{method}
		if method == "GET" {
			methods = append(methods, "HEAD")
		}
		// The administrator goes last: its deletes (a connection, a vhost)
		// must not change what the others are walked against.
		for _, tag := range tags {
			for _, vh := range vhosts {
				path := strings.NewReplacer(
					"{vhost}", url.PathEscape(vhostFor(rt.Pattern, vh)), "{user}", "scratch-user",
					"{name}", nameFor(rt.Pattern, connName, n.Cfg.Cluster.NodeName), "{exchange}", "x", "{queue}", "q",
					"{dest}", "x2", "{props}", "k", "{port}", httpPort,
					"{side}", "source", "{component}", "federation-upstream", "{protocols}", "amqp",
				).Replace(pattern)
				allowed := hasTag(tag, e.tag)
				if vh == denied && (tag != "administrator" || e.perms) {
					allowed = false
				}
				if e.others != "" && !hasTag(tag, e.others) {
					allowed = false
				}
				for _, m := range methods {
					a := api{t: t, base: n.HTTPURL(), user: "u-" + tag, pass: "pw"}
					var body any
					if m != "GET" && m != "HEAD" && m != "DELETE" {
						body = e.body
					}
					code, data := a.do(m, path, body)
					switch {
					case !allowed && code != http.StatusUnauthorized:
						t.Errorf("%s %s as %q: %d, want 401: %s", m, path, tag, code, data)
					case !allowed && m != "HEAD" && errorKind(data) != "not_authorised":
						t.Errorf("%s %s as %q: error %s, want not_authorised", m, path, tag, data)
					case allowed && (code == http.StatusUnauthorized || code == http.StatusForbidden || code >= 500):
						t.Errorf("%s %s as %q: %d, want it served: %s", m, path, tag, code, data)
					}
				}
			}
		}
	}
	for p := range walk {
		if !walked[p] {
			t.Errorf("the walk lists %q, which is not a route", p)
		}
	}
}

// vhostFor is the vhost a route is walked on: the administrator-only routes
// that create or delete a vhost act on a scratch one, so the walk's vhosts
// stay.
func vhostFor(pattern, vh string) string {
	if strings.HasPrefix(pattern, "PUT /api/vhosts/") || strings.HasPrefix(pattern, "DELETE /api/vhosts/") {
		return "scratch-" + vh
	}
	return vh
}

// nameFor is the {name} of a route: a queue, exchange, policy, node or
// connection the walk set up.
func nameFor(pattern, conn, node string) string {
	switch {
	case strings.Contains(pattern, "/api/queues/"):
		return "q"
	case strings.Contains(pattern, "/api/exchanges/"):
		return "x"
	case strings.Contains(pattern, "/api/policies/"):
		return "p"
	case strings.Contains(pattern, "/api/nodes/"):
		return node
	case strings.Contains(pattern, "/api/connections/"):
		return conn
	}
	return "none"
}

func errorKind(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error
}
