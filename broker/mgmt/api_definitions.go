package mgmt

import (
	"net/http"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/routing"
	"github.com/warrenmq/warren/broker/vhost"
)

func (s *Server) getDefinitions(w http.ResponseWriter, r *http.Request, u caller) {
	vh, _ := vhostFilter(r)
	d := meta.Export(s.b.Meta(), vh)
	d.RabbitVersion, d.RabbitMQVersion, d.ProductVersion = "3.13.0", "3.13.0", s.b.Version()
	if r.URL.Query().Get("download") != "" {
		w.Header().Set("Content-Disposition", `attachment; filename="`+r.URL.Query().Get("download")+`"`)
	}
	writeJSON(w, http.StatusOK, d)
}

// postDefinitions imports a RabbitMQ definitions document: access objects
// into the metadata store, then queues, exchanges and bindings through the
// running vhosts. The whole document is checked first (checkDefinitions):
// a document with an item that would be refused changes nothing, and the
// answer (400) names the item.
func (s *Server) postDefinitions(w http.ResponseWriter, r *http.Request, u caller) {
	var d meta.Definitions
	if err := decodeBody(r, &d); err != nil {
		writeErr(w, err)
		return
	}
	if vh, ok := vhostFilter(r); ok {
		for i := range d.Queues {
			d.Queues[i].Vhost = vh
		}
		for i := range d.Exchanges {
			d.Exchanges[i].Vhost = vh
		}
		for i := range d.Bindings {
			d.Bindings[i].Vhost = vh
		}
		for i := range d.Policies {
			d.Policies[i].Vhost = vh
		}
		d.Users, d.Vhosts, d.Permissions = nil, nil, nil
	}
	for i := range d.Policies {
		d.Policies[i].Definition, _ = normalizeNumbers(d.Policies[i].Definition).(map[string]any)
	}
	for i := range d.Exchanges {
		d.Exchanges[i].Arguments, _ = normalizeNumbers(d.Exchanges[i].Arguments).(map[string]any)
	}
	for i := range d.Queues {
		d.Queues[i].Arguments, _ = normalizeNumbers(d.Queues[i].Arguments).(map[string]any)
	}
	for i := range d.Bindings {
		d.Bindings[i].Arguments, _ = normalizeNumbers(d.Bindings[i].Arguments).(map[string]any)
	}
	if err := s.checkDefinitions(d); err != nil {
		writeErr(w, err)
		return
	}
	ctx := r.Context()
	if err := meta.ImportAccess(ctx, s.b.Meta(), d); err != nil {
		writeErr(w, err)
		return
	}
	get := func(name string) (*vhost.Vhost, bool) {
		v, ok := s.b.Vhost(name)
		if !ok {
			writeError(w, http.StatusBadRequest, "bad_request", "vhost '"+name+"' does not exist")
		}
		return v, ok
	}
	for _, x := range d.Exchanges {
		v, ok := get(x.Vhost)
		if !ok {
			return
		}
		if err := v.DeclareExchange(ctx, vhost.ExchangeDecl{Name: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Args: x.Arguments}); err != nil {
			writeErr(w, err)
			return
		}
	}
	for _, q := range d.Queues {
		v, ok := get(q.Vhost)
		if !ok {
			return
		}
		if _, _, err := v.DeclareQueue(ctx, vhost.QueueDecl{Name: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Args: queueArgs(q)}); err != nil {
			writeErr(w, err)
			return
		}
	}
	for _, b := range d.Bindings {
		v, ok := get(b.Vhost)
		if !ok {
			return
		}
		rb := routing.Binding{Source: b.Source, Destination: b.Destination, ToExchange: b.DestinationType == "exchange", Key: b.RoutingKey, Args: b.Arguments}
		if err := v.Bind(ctx, rb); err != nil {
			writeErr(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
