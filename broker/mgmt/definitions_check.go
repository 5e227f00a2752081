package mgmt

import (
	"fmt"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
	"github.com/warrenmq/warren/broker/vhost"
)

// checkDefinitions validates a whole definitions document before any of it
// is imported, so an import is all or nothing: the users, vhosts,
// permissions and policies as the metadata store would take them, then each
// exchange, queue and binding as its vhost would declare it, against what
// the vhost holds and what the items before it add (in scratch copies).
// The error names the first item refused: its section, index and name.
func (s *Server) checkDefinitions(d meta.Definitions) error {
	if err := meta.CheckAccess(s.b.Meta(), d); err != nil {
		return fmt.Errorf("%w: %v", errBadRequest, err)
	}
	// The vhosts of the document, with the default queue type each will
	// have (the document's, else the one it has now).
	newVhosts := map[string]string{}
	for _, v := range d.Vhosts {
		dq := v.DefaultQueueType
		if md, ok := v.Metadata["default_queue_type"].(string); ok && dq == "" {
			dq = md
		}
		if dq == "" {
			if rv, ok := s.b.Vhost(v.Name); ok {
				dq = rv.Settings().DefaultQueueType
			}
		}
		newVhosts[v.Name] = dq
	}
	type scratch struct {
		routes      *routing.Table
		queues      map[string]*queue.Info
		defaultType string
	}
	vhosts := map[string]*scratch{}
	// in is the scratch copy of a vhost an item names, or an error if the
	// vhost neither runs nor is in the document.
	in := func(name string) (*scratch, error) {
		if sc, ok := vhosts[name]; ok {
			return sc, nil
		}
		dq, inDoc := newVhosts[name]
		sc := &scratch{routes: routing.NewTable(), queues: map[string]*queue.Info{}, defaultType: dq}
		if v, ok := s.b.Vhost(name); ok {
			if !inDoc {
				sc.defaultType = v.Settings().DefaultQueueType
			}
			for _, x := range v.Routes().Exchanges() {
				_, _, _ = sc.routes.DeclareExchange(x)
			}
			for _, q := range v.Queues() {
				info := q.Info()
				sc.queues[info.Name] = &info
			}
		} else if !inDoc {
			return nil, fmt.Errorf("vhost '%s' does not exist", name)
		}
		vhosts[name] = sc
		return sc, nil
	}
	refuse := func(item string, err error) error {
		return fmt.Errorf("%w: %s: %v", errBadRequest, item, err)
	}
	for i, x := range d.Exchanges {
		item := fmt.Sprintf("exchanges[%d] '%s' in vhost '%s'", i, x.Name, x.Vhost)
		sc, err := in(x.Vhost)
		if err == nil {
			err = vhost.CheckExchangeDecl(x.Vhost, sc.routes, vhost.ExchangeDecl{Name: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Args: x.Arguments})
		}
		if err != nil {
			return refuse(item, err)
		}
	}
	for i, q := range d.Queues {
		item := fmt.Sprintf("queues[%d] '%s' in vhost '%s'", i, q.Name, q.Vhost)
		sc, err := in(q.Vhost)
		if err == nil && q.Name == "" {
			err = fmt.Errorf("a queue needs a name")
		}
		if err == nil {
			args := queueArgs(q)
			err = vhost.CheckQueueDecl(q.Vhost, sc.defaultType, sc.queues[q.Name], vhost.QueueDecl{Name: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Args: args})
			if sc.queues[q.Name] == nil {
				sc.queues[q.Name] = &queue.Info{Vhost: q.Vhost, Name: q.Name, Durable: q.Durable, AutoDelete: q.AutoDelete, Args: args}
			}
		}
		if err != nil {
			return refuse(item, err)
		}
	}
	for i, b := range d.Bindings {
		item := fmt.Sprintf("bindings[%d] '%s' -> %s '%s' in vhost '%s'", i, b.Source, destType(b), b.Destination, b.Vhost)
		sc, err := in(b.Vhost)
		if err != nil {
			return refuse(item, err)
		}
		switch _, srcOK := sc.routes.Exchange(b.Source); {
		case b.Source == "":
			return refuse(item, fmt.Errorf("operation not permitted on the default exchange"))
		case !srcOK:
			return refuse(item, fmt.Errorf("no exchange '%s' in vhost '%s'", b.Source, b.Vhost))
		}
		switch destType(b) {
		case "exchange":
			if _, ok := sc.routes.Exchange(b.Destination); !ok {
				return refuse(item, fmt.Errorf("no exchange '%s' in vhost '%s'", b.Destination, b.Vhost))
			}
		case "queue":
			if sc.queues[b.Destination] == nil {
				return refuse(item, fmt.Errorf("no queue '%s' in vhost '%s'", b.Destination, b.Vhost))
			}
		default:
			return refuse(item, fmt.Errorf("destination_type '%s' is neither queue nor exchange", b.DestinationType))
		}
	}
	return nil
}

// destType is a binding's destination type ("queue" when left out).
func destType(b meta.Binding) string {
	if b.DestinationType == "" {
		return "queue"
	}
	return b.DestinationType
}

// queueArgs is a definitions queue's arguments with its type among them.
func queueArgs(q meta.DefQueue) map[string]any {
	args := q.Arguments
	if q.Type != "" && args["x-queue-type"] == nil {
		args = make(map[string]any, len(q.Arguments)+1)
		for k, v := range q.Arguments {
			args[k] = v
		}
		args["x-queue-type"] = q.Type
	}
	return args
}
