package mgmt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	amqp "github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
	"github.com/warrenmq/warren/broker/vhost"
)

// vhostsFor is the vhosts a list route shows: the one in its path (which
// the route checked the caller may see), or every vhost the caller sees.
func (s *Server) vhostsFor(r *http.Request, w http.ResponseWriter, u caller) ([]*vhost.Vhost, bool) {
	if name, ok := vhostFilter(r); ok {
		v, ok := s.vhostOr404(w, name)
		if !ok {
			return nil, false
		}
		return []*vhost.Vhost{v}, true
	}
	var vs []*vhost.Vhost
	for _, v := range s.b.VhostList() {
		if s.sees(u, v.Name()) {
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].Name() < vs[j].Name() })
	return vs, true
}

func (s *Server) queueJSON(q queue.Queue) map[string]any {
	info, st := q.Info(), q.Stats()
	args := info.Args
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{
		"name":                         info.Name,
		"vhost":                        info.Vhost,
		"type":                         info.Type,
		"durable":                      info.Durable,
		"auto_delete":                  info.AutoDelete,
		"exclusive":                    info.Exclusive,
		"arguments":                    args,
		"messages":                     st.Ready + st.Unacked,
		"messages_ready":               st.Ready,
		"messages_unacknowledged":      st.Unacked,
		"message_bytes":                st.ReadyBytes + st.UnackedBytes,
		"message_bytes_ready":          st.ReadyBytes,
		"message_bytes_unacknowledged": st.UnackedBytes,
		"consumers":                    st.Consumers,
		"memory":                       st.MemoryBytes,
		"state":                        "running",
		"node":                         s.b.NodeName(),
		"single_active_consumer_tag":   nil,
		"message_stats":                s.queueMessageStats(info.Vhost, info.Name, st.Published, st.Delivered, st.Acked),
	}
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request, u caller) {
	vh, one := vhostFilter(r)
	if one {
		if _, ok := s.vhostOr404(w, vh); !ok {
			return
		}
	}
	items, answered, clustered := s.gather(r.Context(), itemsRequest{Kind: kindQueues, Vhost: vh, One: one})
	if clustered {
		items = s.withDownQueues(items, answered, vh, one)
	}
	out := make([]any, 0, len(items))
	for _, it := range items {
		if (one && it.Vhost == vh) || (!one && s.sees(u, it.Vhost)) {
			out = append(out, it.Body)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getQueue(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	name := pv(r, "name")
	// A queue another node holds is that node's to describe (the vhost
	// may hand out a forwarding proxy for it, without its figures).
	rec, err := v.QueueRecord(r.Context(), name, 0)
	if err != nil {
		writeErr(w, err)
		return
	}
	if s.recordNode(rec) != s.b.NodeName() {
		body, err := s.remoteQueue(r.Context(), rec)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, body)
		return
	}
	q, err := v.Queue(r.Context(), name, 0)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.queueJSON(q))
}

func (s *Server) putQueue(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	var body struct {
		Durable    *bool          `json:"durable"`
		AutoDelete bool           `json:"auto_delete"`
		Arguments  map[string]any `json:"arguments"`
		Type       string         `json:"type"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeErr(w, err)
		return
	}
	args, _ := normalizeNumbers(body.Arguments).(map[string]any)
	if body.Type != "" {
		if args == nil {
			args = map[string]any{}
		}
		args["x-queue-type"] = body.Type
	}
	durable := body.Durable == nil || *body.Durable
	name := pv(r, "name")
	if !s.allowed(w, u, v.Name(), meta.Configure, "queue", name) {
		return
	}
	_, created, err := v.DeclareQueue(r.Context(), vhost.QueueDecl{Name: name, Durable: durable, AutoDelete: body.AutoDelete, Args: args,
		Authorize: func(name string, args queue.Args) error { return s.authorizeNewQueue(u, v.Name(), name, args) }})
	if err != nil {
		writeErr(w, err)
		return
	}
	if created {
		w.WriteHeader(http.StatusCreated)
	} else {
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) deleteQueue(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	qv := r.URL.Query()
	if !s.allowed(w, u, v.Name(), meta.Configure, "queue", pv(r, "name")) {
		return
	}
	_, err := v.DeleteQueue(r.Context(), pv(r, "name"), vhost.QueueDeleteOptions{IfUnused: qv.Get("if-unused") == "true", IfEmpty: qv.Get("if-empty") == "true", Force: true})
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) purgeQueue(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	if !s.allowed(w, u, v.Name(), meta.Read, "queue", pv(r, "name")) {
		return
	}
	q, err := v.Queue(r.Context(), pv(r, "name"), apiOwner)
	if err != nil {
		writeErr(w, err)
		return
	}
	if _, err := q.Purge(r.Context()); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func exchangeJSON(vh string, x routing.Exchange, stats map[string]any) map[string]any {
	args := x.Args
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{"name": x.Name, "vhost": vh, "type": x.Kind.String(), "durable": x.Durable, "auto_delete": x.AutoDelete, "internal": x.Internal, "arguments": args,
		"message_stats": stats}
}

func (s *Server) listExchanges(w http.ResponseWriter, r *http.Request, u caller) {
	vs, ok := s.vhostsFor(r, w, u)
	if !ok {
		return
	}
	out := []map[string]any{}
	counts := s.exchangeCounts()
	for _, v := range vs {
		for _, x := range v.Routes().Exchanges() {
			out = append(out, exchangeJSON(v.Name(), x, s.exchangeMessageStats(counts, v.Name(), x.Name)))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getExchange(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	x, err := v.Exchange(exchangeName(pv(r, "name")))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, exchangeJSON(v.Name(), x, s.exchangeMessageStats(s.exchangeCounts(), v.Name(), x.Name)))
}

// exchangeName maps the API's name for the default exchange.
func exchangeName(n string) string {
	if n == "amq.default" {
		return ""
	}
	return n
}

func (s *Server) putExchange(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	var body struct {
		Type       string         `json:"type"`
		Durable    *bool          `json:"durable"`
		AutoDelete bool           `json:"auto_delete"`
		Internal   bool           `json:"internal"`
		Arguments  map[string]any `json:"arguments"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeErr(w, err)
		return
	}
	args, _ := normalizeNumbers(body.Arguments).(map[string]any)
	name := pv(r, "name")
	if !s.allowed(w, u, v.Name(), meta.Configure, "exchange", name) {
		return
	}
	_, existed := v.Routes().Exchange(name)
	err := v.DeclareExchange(r.Context(), vhost.ExchangeDecl{Name: name, Type: body.Type, Durable: body.Durable == nil || *body.Durable, AutoDelete: body.AutoDelete, Internal: body.Internal, Args: args,
		Authorize: func(alternate string) error { return s.authorizeNewExchange(u, v.Name(), name, alternate) }})
	if err != nil {
		writeErr(w, err)
		return
	}
	if existed {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

func (s *Server) deleteExchange(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	if !s.allowed(w, u, v.Name(), meta.Configure, "exchange", pv(r, "name")) {
		return
	}
	if err := v.DeleteExchange(r.Context(), pv(r, "name"), r.URL.Query().Get("if-unused") == "true"); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// propertiesKey is RabbitMQ's binding id within its source and destination.
func propertiesKey(b routing.Binding) string {
	if len(b.Args) == 0 {
		if b.Key == "" {
			return "~"
		}
		return url.PathEscape(b.Key)
	}
	return url.PathEscape(b.Key) + "~" + strconv.Itoa(len(b.Args))
}

func bindingJSON(vh string, b routing.Binding) map[string]any {
	dt := "queue"
	if b.ToExchange {
		dt = "exchange"
	}
	args := b.Args
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{"source": b.Source, "vhost": vh, "destination": b.Destination, "destination_type": dt, "routing_key": b.Key, "arguments": args, "properties_key": propertiesKey(b)}
}

// bindingsOf lists a vhost's bindings, the default exchange's implicit ones included.
func bindingsOf(v *vhost.Vhost) []map[string]any {
	var out []map[string]any
	qs := v.Queues()
	sort.Slice(qs, func(i, j int) bool { return qs[i].Info().Name < qs[j].Info().Name })
	for _, q := range qs {
		out = append(out, bindingJSON(v.Name(), routing.Binding{Source: "", Destination: q.Info().Name, Key: q.Info().Name}))
	}
	for _, b := range v.Routes().Bindings() {
		out = append(out, bindingJSON(v.Name(), b))
	}
	return out
}

func (s *Server) listBindings(w http.ResponseWriter, r *http.Request, u caller) {
	vs, ok := s.vhostsFor(r, w, u)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, v := range vs {
		out = append(out, bindingsOf(v)...)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listBindingsBetween(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	src := exchangeName(pv(r, "exchange"))
	dst, toX := pv(r, "queue"), false
	if dst == "" {
		dst, toX = pv(r, "dest"), true
	}
	out := []map[string]any{}
	for _, b := range v.Routes().Bindings() {
		if b.Source == src && b.Destination == dst && b.ToExchange == toX {
			out = append(out, bindingJSON(v.Name(), b))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) postBinding(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	var body struct {
		RoutingKey string         `json:"routing_key"`
		Arguments  map[string]any `json:"arguments"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeErr(w, err)
		return
	}
	args, _ := normalizeNumbers(body.Arguments).(map[string]any)
	b := routing.Binding{Source: pv(r, "exchange"), Key: body.RoutingKey, Args: args}
	if q := pv(r, "queue"); q != "" {
		b.Destination = q
	} else {
		b.Destination, b.ToExchange = pv(r, "dest"), true
	}
	if err := s.authorizeBinding(u, v.Name(), b); err != nil {
		writeErr(w, err)
		return
	}
	if err := v.Bind(r.Context(), b); err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set("Location", propertiesKey(b))
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) deleteBinding(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	src := pv(r, "exchange")
	dst, toX := pv(r, "queue"), false
	if dst == "" {
		dst, toX = pv(r, "dest"), true
	}
	props := pv(r, "props")
	for _, b := range v.Routes().Bindings() {
		if b.Source == src && b.Destination == dst && b.ToExchange == toX && propertiesKey(b) == url.PathEscape(props) || (b.Source == src && b.Destination == dst && b.ToExchange == toX && propertiesKey(b) == props) {
			if err := s.authorizeBinding(u, v.Name(), b); err != nil {
				writeErr(w, err)
				return
			}
			if err := v.Unbind(r.Context(), b); err != nil {
				writeErr(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
}

func connectionJSON(c amqp.ConnectionInfo, node string) map[string]any {
	props := c.ClientProps
	if props == nil {
		props = map[string]any{}
	}
	return map[string]any{
		"name": c.Name, "user": c.User, "vhost": c.Vhost, "host": c.Host, "port": c.Port,
		"peer_host": c.PeerHost, "peer_port": c.PeerPort, "channels": c.Channels, "state": c.State,
		"connected_at": c.ConnectedAt.UnixMilli(), "client_properties": props, "frame_max": c.FrameMax,
		"channel_max": c.ChannelMax, "timeout": int(c.Heartbeat / time.Second), "protocol": "AMQP 0-9-1",
		"node": node, "type": "network", "recv_oct": c.RecvOct, "send_oct": c.SendOct,
	}
}

func (s *Server) listConnections(w http.ResponseWriter, r *http.Request, u caller) {
	items, _, _ := s.gather(r.Context(), itemsRequest{Kind: kindConnections})
	out := make([]any, 0, len(items))
	for _, it := range items {
		if u.mayReach(it.User) {
			out = append(out, it.Body)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getConnection(w http.ResponseWriter, r *http.Request, u caller) {
	name := pv(r, "name")
	items, _, _ := s.gather(r.Context(), itemsRequest{Kind: kindConnections})
	for _, c := range items {
		if c.Key == name {
			if !u.mayReach(c.User) {
				writeError(w, http.StatusUnauthorized, "not_authorised", "User not authorised to access object")
				return
			}
			writeJSON(w, http.StatusOK, c.Body)
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
}

func (s *Server) deleteConnection(w http.ResponseWriter, r *http.Request, u caller) {
	name := pv(r, "name")
	// Only a listed connection is closed, once its user is known to be one
	// the caller may reach: one still in its handshake is not found (it
	// could turn out to be another user's). It is closed on the node that
	// holds it.
	items, _, _ := s.gather(r.Context(), itemsRequest{Kind: kindConnections})
	node := ""
	for _, c := range items {
		if c.Key == name {
			if !u.mayReach(c.User) {
				writeError(w, http.StatusUnauthorized, "not_authorised", "User not authorised to access object")
				return
			}
			node = c.Node
			break
		}
	}
	if node == "" {
		writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
		return
	}
	err := s.closeConnectionAt(r.Context(), node, name, r.Header.Get("X-Reason"))
	if errors.Is(err, amqp.ErrNoConnection) {
		writeError(w, http.StatusNotFound, "not_found", "Object Not Found")
		return
	}
	if err != nil {
		writeNodeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listChannels(w http.ResponseWriter, r *http.Request, u caller) {
	items, _, _ := s.gather(r.Context(), itemsRequest{Kind: kindChannels})
	out := make([]any, 0, len(items))
	for _, c := range items {
		if u.mayReach(c.User) {
			out = append(out, c.Body)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// channelJSON renders one of this node's channels.
func (s *Server) channelJSON(c amqp.ChannelInfo, conns map[string]amqp.ConnectionInfo) map[string]any {
	return map[string]any{
		"name": channelName(c), "number": c.Number,
		"connection_details": connectionDetails(conns[c.Connection], c.Connection), "user": c.User, "vhost": c.Vhost,
		"consumer_count": c.Consumers, "messages_unacknowledged": c.Unacked, "messages_unconfirmed": c.UnconfirmedLen,
		"prefetch_count": c.PrefetchCount, "global_prefetch_count": c.GlobalPrefetch,
		"confirm": c.Confirm, "transactional": c.Transactional, "node": s.b.NodeName(), "state": "running",
		"message_stats": s.channelMessageStats(c),
	}
}

// channelName is RabbitMQ's name of a channel: its connection's and its number.
func channelName(c amqp.ChannelInfo) string { return fmt.Sprintf("%s (%d)", c.Connection, c.Number) }

// connectionsByName indexes the open connections by name, for the lists
// (channels, consumers) that name their connection's peer.
func (s *Server) connectionsByName() map[string]amqp.ConnectionInfo {
	out := map[string]amqp.ConnectionInfo{}
	for _, c := range s.b.Connections() {
		out[c.Name] = c
	}
	return out
}

// connectionDetails is a channel's connection_details: the connection's
// name and its peer (zero if it closed meanwhile).
func connectionDetails(c amqp.ConnectionInfo, name string) map[string]any {
	return map[string]any{"name": name, "peer_host": c.PeerHost, "peer_port": c.PeerPort}
}

// overview is GET /api/overview: the cluster's totals, each member's
// asked of it (see cluster_view.go). A monitoring user (or administrator)
// gets every vhost's totals, the members' counters summed and their
// listeners; any other management user totals over the vhosts it has
// access to and its own connections and channels, as RabbitMQ's overview
// does. The queues of a member that does not answer count from the
// metadata.
func (s *Server) overview(w http.ResponseWriter, r *http.Request, u caller) {
	all, answered, clustered := s.clusterTotals(r.Context())
	var queues, consumers, ready, unacked, exchanges int
	qstats, summed := newCounts(len(queueStats)), false
	for _, v := range s.b.VhostList() {
		if !u.monitor && !s.hasAccess(u, v.Name()) {
			continue
		}
		exchanges += len(v.Routes().Exchanges())
		for _, t := range all {
			vt, ok := t.Vhosts[v.Name()]
			if !ok {
				continue
			}
			queues += vt.Queues
			consumers += vt.Consumers
			ready += vt.Ready
			unacked += vt.Unacked
			if vt.Queues > 0 {
				qstats.add(vt.Stats)
				summed = true
			}
		}
		if clustered {
			queues += len(s.downQueues(v.Name(), answered))
		}
	}
	conns, chans := 0, 0
	global, churn := newCounts(len(globalStats)), newCounts(len(churnStats))
	var listeners []map[string]any
	for _, t := range all {
		for user, n := range t.Connections {
			if u.mayReach(user) {
				conns += n
			}
		}
		for user, n := range t.Channels {
			if u.mayReach(user) {
				chans += n
			}
		}
		global.add(t.Global)
		churn.add(t.Churn)
		listeners = append(listeners, t.Listeners...)
	}
	messageStats := map[string]any{}
	if summed {
		messageStats = withRates(queueStats[:], qstats.C, qstats.R)
	}
	out := map[string]any{
		"management_version":        s.b.Version(),
		"rabbitmq_version":          "3.13.0",
		"product_name":              "Warren",
		"product_version":           s.b.Version(),
		"cluster_name":              s.clusterName(),
		"erlang_version":            runtime.Version(),
		"erlang_full_version":       "Go " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"rates_mode":                "basic",
		"sample_retention_policies": map[string]any{"global": []int{600, 3600, 28800, 86400}, "basic": []int{600, 3600}, "detailed": []int{600}},
		"exchange_types":            exchangeTypes(),
		"default_queue_type":        "classic",
		"disable_stats":             false,
		"enable_queue_totals":       true,
		"statistics_db_event_queue": 0,
		"object_totals":             map[string]any{"connections": conns, "channels": chans, "exchanges": exchanges, "queues": queues, "consumers": consumers},
		"queue_totals":              map[string]any{"messages": ready + unacked, "messages_ready": ready, "messages_unacknowledged": unacked},
		"message_stats":             messageStats,
	}
	if u.monitor {
		out["message_stats"] = withRates(globalStats[:], global.C, global.R)
		out["churn_rates"] = withRates(churnStats[:], churn.C, churn.R)
		sortListeners(listeners)
		out["node"], out["listeners"] = s.b.NodeName(), listeners
	}
	writeJSON(w, http.StatusOK, out)
}

// exchangeTypes lists the exchange types, as the overview names them.
func exchangeTypes() []map[string]any {
	var out []map[string]any
	for _, t := range []string{"direct", "fanout", "headers", "topic"} {
		out = append(out, map[string]any{"name": t, "description": "AMQP " + t + " exchange, as per the AMQP specification", "enabled": true})
	}
	return out
}

func (s *Server) healthAlarms(w http.ResponseWriter, r *http.Request, u caller) {
	if a := s.b.Alarms(); len(a) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "failed", "reason": "resource alarm(s) in effect: " + strings.Join(a, ", "), "alarms": a})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) healthVhosts(w http.ResponseWriter, r *http.Request, u caller) {
	if writeFault(w, s.b.Fault()) {
		return
	}
	var down []string
	for _, v := range s.b.Meta().Vhosts() {
		if _, ok := s.b.Vhost(v.Name); !ok {
			down = append(down, v.Name)
		}
	}
	if len(down) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "failed", "reason": "Some virtual hosts are down", "missing": down})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) healthPort(w http.ResponseWriter, r *http.Request, u caller) {
	port := pv(r, "port")
	for _, addr := range s.b.Listeners() {
		if _, p, _ := net.SplitHostPort(addr); p == port {
			writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "port": port})
			return
		}
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "failed", "reason": fmt.Sprintf("No active listener on port %s", port)})
}

func (s *Server) healthReady(w http.ResponseWriter, r *http.Request, u caller) {
	s.readyz(w, r)
}

// readyz is the unauthenticated readiness probe: no fault, recovered,
// listening, no alarm.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if writeFault(w, s.b.Fault()) {
		return
	}
	if !s.b.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "failed", "reason": "node is starting"})
		return
	}
	if a := s.b.Alarms(); len(a) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "failed", "reason": "resource alarm(s) in effect", "alarms": a})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// healthz is the unauthenticated liveness probe: the process answers and
// has no fault that only a restart clears (its metadata group down after a
// failed reset), which a liveness probe's restart then clears.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if writeFault(w, s.b.Fault()) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// writeFault answers 503 with the node's fault, if it has one, and
// reports whether it did.
func writeFault(w http.ResponseWriter, fault error) bool {
	if fault == nil {
		return false
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "failed", "error": "node_fault", "reason": fault.Error()})
	return true
}

// aliveness declares a queue, publishes to it and reads the message back.
func (s *Server) aliveness(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	// What the test does over AMQP in RabbitMQ: declare, publish through
	// the default exchange, get.
	for _, need := range []struct {
		kind           meta.Access
		resource, name string
	}{{meta.Configure, "queue", "aliveness-test"}, {meta.Write, "exchange", ""}, {meta.Read, "queue", "aliveness-test"}} {
		if !s.allowed(w, u, v.Name(), need.kind, need.resource, need.name) {
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	q, _, err := v.DeclareQueue(ctx, vhost.QueueDecl{Name: "aliveness-test"})
	if err != nil {
		writeErr(w, err)
		return
	}
	q.Publish([]queue.Publish{{Msg: &message.Message{ID: uint64(time.Now().UnixNano()), RoutingKey: "aliveness-test", Body: []byte("test_message"), Timestamp: time.Now().UnixNano()}}})
	for {
		d, ok, err := q.Get(ctx, true)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "failed", "reason": err.Error()})
			return
		}
		if ok && string(d.Msg.Body) == "test_message" {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
			return
		}
		select {
		case <-ctx.Done():
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "failed", "reason": "message not returned"})
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}
