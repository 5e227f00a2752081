package mgmt

import (
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/routing"
)

// The lists and small resources rabbitmqadmin v2 and monitoring tools read
// beyond the core objects: consumers, the bindings of one queue or
// exchange, a vhost's permissions and connections, the connections of a
// user, and the resources Warren has none of (runtime parameters, limits,
// deprecated features in use, extensions), answered as RabbitMQ answers
// when there are none.

// listConsumers is GET /api/consumers[/{vhost}]: the AMQP consumers in the
// vhosts the caller sees; a caller without monitoring sees only those on
// its own channels (RabbitMQ's filter_user).
func (s *Server) listConsumers(w http.ResponseWriter, r *http.Request, u caller) {
	vh, one := vhostFilter(r)
	if one {
		if _, ok := s.vhostOr404(w, vh); !ok {
			return
		}
	}
	items, _, _ := s.gather(r.Context(), itemsRequest{Kind: kindConsumers, Vhost: vh, One: one})
	out := make([]any, 0, len(items))
	for _, c := range items {
		if (one && c.Vhost != vh) || !s.sees(u, c.Vhost) || !u.mayReach(c.User) {
			continue
		}
		out = append(out, c.Body)
	}
	writeJSON(w, http.StatusOK, out)
}

func consumerJSON(c amqp.ConsumerInfo, conn amqp.ConnectionInfo, node string) map[string]any {
	args := c.Args
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{
		"consumer_tag": c.Tag, "ack_required": c.AckRequired, "exclusive": c.Exclusive, "prefetch_count": c.Prefetch,
		"arguments": args, "active": true, "activity_status": "up", "consumer_timeout": 1800000,
		"queue": map[string]any{"name": c.Queue, "vhost": c.Vhost},
		"channel_details": map[string]any{
			"name": channelName(amqp.ChannelInfo{Connection: c.Connection, Number: c.Channel}), "number": c.Channel,
			"connection_name": c.Connection, "node": node, "peer_host": conn.PeerHost, "peer_port": conn.PeerPort, "user": c.User,
		},
	}
}

// listQueueBindings is GET /api/queues/{vhost}/{name}/bindings: the
// bindings whose destination is the queue, the default exchange's
// included.
func (s *Server) listQueueBindings(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	name := pv(r, "name")
	if _, err := v.Queue(r.Context(), name, 0); err != nil {
		writeErr(w, err)
		return
	}
	out := []map[string]any{bindingJSON(v.Name(), routing.Binding{Destination: name, Key: name})}
	for _, b := range v.Routes().Bindings() {
		if !b.ToExchange && b.Destination == name {
			out = append(out, bindingJSON(v.Name(), b))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// listExchangeBindings is GET /api/exchanges/{vhost}/{name}/bindings/source
// (the exchange's own bindings) and .../destination (exchange-to-exchange
// bindings into it).
func (s *Server) listExchangeBindings(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	name := exchangeName(pv(r, "name"))
	if _, err := v.Exchange(name); err != nil {
		writeErr(w, err)
		return
	}
	source := pv(r, "side") == "source"
	if side := pv(r, "side"); side != "source" && side != "destination" {
		writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
		return
	}
	out := []map[string]any{}
	if source && name == "" {
		for _, b := range bindingsOf(v) {
			if b["source"] == "" {
				out = append(out, b)
			}
		}
	}
	for _, b := range v.Routes().Bindings() {
		if (source && b.Source == name) || (!source && b.ToExchange && b.Destination == name) {
			out = append(out, bindingJSON(v.Name(), b))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// listVhostPermissions is GET /api/vhosts/{vhost}/permissions.
func (s *Server) listVhostPermissions(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	out := []meta.Permission{}
	for _, p := range s.b.Meta().Permissions() {
		if p.Vhost == v.Name() {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	writeJSON(w, http.StatusOK, out)
}

// listVhostConnections is GET /api/vhosts/{vhost}/connections: the vhost's
// connections the caller reaches (its own, or all with monitoring).
func (s *Server) listVhostConnections(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	items, _, _ := s.gather(r.Context(), itemsRequest{Kind: kindConnections, Vhost: v.Name(), One: true})
	out := make([]any, 0, len(items))
	for _, c := range items {
		if c.Vhost == v.Name() && u.mayReach(c.User) {
			out = append(out, c.Body)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// listUserConnections is GET /api/connections/username/{user}: a user's
// connections, for that user or a monitoring one.
func (s *Server) listUserConnections(w http.ResponseWriter, r *http.Request, u caller) {
	user := pv(r, "user")
	if !u.mayReach(user) {
		writeError(w, http.StatusUnauthorized, "not_authorised", "User not authorised to access object")
		return
	}
	items, _, _ := s.gather(r.Context(), itemsRequest{Kind: kindConnections})
	out := make([]any, 0, len(items))
	for _, c := range items {
		if c.User == user {
			out = append(out, c.Body)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// closeUserConnections is DELETE /api/connections/username/{user}: closes
// a user's connections, for that user or an administrator.
func (s *Server) closeUserConnections(w http.ResponseWriter, r *http.Request, u caller) {
	user := pv(r, "user")
	if !u.mayReach(user) {
		writeError(w, http.StatusUnauthorized, "not_authorised", "User not authorised to access object")
		return
	}
	items, _, _ := s.gather(r.Context(), itemsRequest{Kind: kindConnections})
	for _, c := range items {
		if c.User != user {
			continue
		}
		if err := s.closeConnectionAt(r.Context(), c.Node, c.Key, r.Header.Get("X-Reason")); err != nil && !errors.Is(err, amqp.ErrNoConnection) {
			writeNodeErr(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// listNone answers a list Warren has nothing for (runtime parameters,
// vhost limits, deprecated features in use): [], after the route's checks
// and, with a vhost in the path, a 404 for a vhost that does not exist.
func (s *Server) listNone(w http.ResponseWriter, r *http.Request, u caller) {
	if vh, ok := vhostFilter(r); ok {
		if _, ok := s.vhostOr404(w, vh); !ok {
			return
		}
	}
	writeJSON(w, http.StatusOK, []any{})
}

// listUserLimits is GET /api/user-limits/{user}: none set, for that user
// or a monitoring one.
func (s *Server) listUserLimits(w http.ResponseWriter, r *http.Request, u caller) {
	user := pv(r, "user")
	if !u.mayReach(user) {
		writeError(w, http.StatusUnauthorized, "not_authorised", "User not authorised to access object")
		return
	}
	if _, ok := s.b.Meta().User(user); !ok {
		writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
		return
	}
	writeJSON(w, http.StatusOK, []any{})
}

// globalParameters is GET /api/global-parameters: the cluster name, as
// RabbitMQ stores it.
func (s *Server) globalParameters(w http.ResponseWriter, r *http.Request, u caller) {
	writeJSON(w, http.StatusOK, []map[string]any{{"name": "cluster_name", "value": s.clusterName()}})
}

// clusterName is the name RabbitMQ gives a cluster by default, its first
// node's: the least member name in the metadata, the same on every node
// (a node alone, or before its directory entry is written: its own name).
func (s *Server) clusterName() string {
	name := ""
	for _, n := range s.b.Meta().Nodes() {
		if name == "" || n.Name < name {
			name = n.Name
		}
	}
	if name == "" {
		return s.b.NodeName()
	}
	return name
}

// getClusterName is GET /api/cluster-name.
func (s *Server) getClusterName(w http.ResponseWriter, r *http.Request, u caller) {
	writeJSON(w, http.StatusOK, map[string]string{"name": s.clusterName()})
}

// extensions is GET /api/extensions: the management UI's plugins (none).
func (s *Server) extensions(w http.ResponseWriter, r *http.Request, u caller) {
	writeJSON(w, http.StatusOK, []any{})
}

// featureFlags is GET /api/feature-flags: the RabbitMQ feature flags whose
// behaviour Warren has, all enabled.
func (s *Server) featureFlags(w http.ResponseWriter, r *http.Request, u caller) {
	out := []map[string]any{}
	for _, f := range []struct{ name, desc string }{
		{"implicit_default_bindings", "Default bindings are now implicit, instead of being stored in the database"},
		{"stream_queue", "Support queues of type `stream`"},
		{"virtual_host_metadata", "Virtual host metadata (description, tags, etc)"},
	} {
		out = append(out, map[string]any{"name": f.name, "desc": f.desc, "state": "enabled", "stability": "required", "provided_by": "rabbit", "doc_url": ""})
	}
	writeJSON(w, http.StatusOK, out)
}

// healthProtocols is GET /api/health/checks/protocol-listener/{protocols}:
// ok when every protocol of the comma-separated list has a listener.
func (s *Server) healthProtocols(w http.ResponseWriter, r *http.Request, u caller) {
	active := map[string]bool{}
	var protocols []string
	for p := range s.b.Listeners() {
		p = rabbitProtocol(p)
		if !active[p] {
			active[p] = true
			protocols = append(protocols, p)
		}
	}
	sort.Strings(protocols)
	var missing []string
	for _, p := range splitComma(pv(r, "protocols")) {
		if p = normalizeProtocol(p); !active[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "failed", "reason": "No active listener", "missing": missing, "protocols": protocols})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "protocols": protocols})
}

// rabbitProtocol names a listener as RabbitMQ's listeners do.
func rabbitProtocol(p string) string {
	if p == "prometheus" {
		return "http/prometheus"
	}
	return p
}

// normalizeProtocol reads a protocol as RabbitMQ's health check does
// (amqp091 and amqp10 are amqp, https is http/ssl, ...).
func normalizeProtocol(p string) string {
	switch p {
	case "amqp091", "amqp10", "amqp1.0", "amqp0-9-1":
		return "amqp"
	case "amqps", "amqp/ssl":
		return "amqp/ssl"
	case "stream", "rabbitmq_stream":
		return "stream"
	case "prometheus":
		return "http/prometheus"
	}
	return p
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// healthQuorumCritical is GET /api/health/checks/node-is-quorum-critical:
// 503 when stopping this node would leave a Raft group it votes in without
// a majority of running voters (today: the metadata group), 200 otherwise;
// a single node is never critical, as RabbitMQ answers.
func (s *Server) healthQuorumCritical(w http.ResponseWriter, r *http.Request, u caller) {
	st, err := s.b.ClusterStatus(r.Context())
	if err != nil {
		writeClusterError(w, err)
		return
	}
	voters, running, self := 0, 0, false
	for _, n := range st.Nodes {
		if !n.Voter {
			continue
		}
		voters++
		if n.Running {
			running++
		}
		if n.Name == s.b.NodeName() {
			self = true
		}
	}
	if voters <= 1 {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "reason": "single node cluster"})
		return
	}
	if self && running-1 < voters/2+1 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{
			"status": "failed",
			"reason": fmt.Sprintf("the metadata store would lose its quorum if node %s is shut down: %d of %d voters running, %d needed", s.b.NodeName(), running, voters, voters/2+1),
			"queues": []any{},
		})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// nodeMemory is GET /api/nodes/{name}/memory: the node's memory under
// RabbitMQ's breakdown keys, from the Go runtime's figures.
func (s *Server) nodeMemory(w http.ResponseWriter, r *http.Request, u caller) {
	if name := pv(r, "name"); name != s.b.NodeName() {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("node '%s' not found", name))
		return
	}
	var queues int64
	for _, v := range s.b.VhostList() {
		for _, q := range v.Queues() {
			queues += q.Stats().MemoryBytes
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"memory": memoryBreakdown(queues)})
}

// unsupported answers a write of what Warren does not have (runtime
// parameters, operator policies, vhost and user limits): 400 saying so,
// as RabbitMQ refuses a parameter of a component it does not know.
func (s *Server) unsupported(w http.ResponseWriter, r *http.Request, u caller) {
	what := map[string]string{"parameters": "runtime parameters", "operator-policies": "operator policies", "vhost-limits": "virtual host limits", "user-limits": "user limits"}[firstSegment(r)]
	writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("%s are not supported by Warren", what))
}

// notFound answers the delete of something Warren never has.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request, u caller) {
	writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
}

// clearLimit clears a vhost or user limit: none is ever set, so it is done
// (204) once the vhost or user exists, as RabbitMQ answers.
func (s *Server) clearLimit(w http.ResponseWriter, r *http.Request, u caller) {
	exists := false
	if user := pv(r, "user"); user != "" {
		_, exists = s.b.Meta().User(user)
	} else {
		_, exists = s.b.Meta().Vhost(pathVhost(r, "vhost"))
	}
	if !exists {
		s.notFound(w, r, u)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// firstSegment is the path's segment after /api/.
func firstSegment(r *http.Request) string {
	p := r.URL.Path[len("/api/"):]
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return p
}
