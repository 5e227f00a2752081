package vhost

import (
	"context"
	"fmt"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
)

// ExchangeDecl is an exchange.declare as the vhost sees it.
type ExchangeDecl struct {
	Name       string
	Type       string
	Passive    bool
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       map[string]any
	// Authorize, when set, is called before a new exchange is recorded
	// (never for one that exists), under no vhost lock, with its
	// alternate-exchange argument ("" if none); an error refuses the
	// declare and is returned as is.
	Authorize func(alternate string) error
}

// DeclareExchange creates an exchange or checks an existing one is
// equivalent. A new exchange is a metadata write (meta.Store.DeclareExchange,
// arbitrated by the state machine); the routing table gets it from the
// event before the write returns.
func (v *Vhost) DeclareExchange(ctx context.Context, d ExchangeDecl) error {
	if d.Name == "" {
		return errorf(ErrAccessRefused, "operation not permitted on the default exchange")
	}
	if d.Passive {
		if _, ok := v.routes.Exchange(d.Name); !ok {
			return errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", d.Name, v.cfg.Name)
		}
		return nil
	}
	kind, err := routing.ParseKind(d.Type)
	if err != nil {
		return errorf(ErrCommandInvalid, "invalid exchange type '%s'", d.Type)
	}
	want := meta.Exchange{Vhost: v.cfg.Name, Name: d.Name, Type: kind.String(), Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal, Arguments: d.Args}
	if have, exists := v.routes.Exchange(d.Name); exists {
		if err := meta.CheckExchangeEquivalent(exchangeToMeta(v.cfg.Name, have), want); err != nil {
			return fromMeta(err, "declare exchange '%s'", d.Name)
		}
		return nil
	}
	if reservedName(d.Name) {
		return errorf(ErrAccessRefused, "exchange name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	ae := ""
	if a, ok := d.Args["alternate-exchange"]; ok {
		s, isString := a.(string)
		if !isString {
			return errorf(ErrPrecondition, "invalid type '%T' for arg 'alternate-exchange' in exchange '%s' in vhost '%s'", a, d.Name, v.cfg.Name)
		}
		ae = s
	}
	if d.Authorize != nil {
		if err := d.Authorize(ae); err != nil {
			return err
		}
	}
	if _, err := v.cfg.Meta.DeclareExchange(ctx, want); err != nil {
		return fromMeta(err, "declare exchange '%s'", d.Name)
	}
	return nil
}

func exchangeToMeta(vhost string, x routing.Exchange) meta.Exchange {
	return meta.Exchange{Vhost: vhost, Name: x.Name, Type: x.Kind.String(), Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: x.Args}
}

// Exchange looks an exchange up.
func (v *Vhost) Exchange(name string) (routing.Exchange, error) {
	e, ok := v.routes.Exchange(name)
	if !ok {
		return e, errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", name, v.cfg.Name)
	}
	return e, nil
}

// DeleteExchange deletes an exchange and its bindings (a metadata write;
// the routing table follows the event).
func (v *Vhost) DeleteExchange(ctx context.Context, name string, ifUnused bool) error {
	if name == "" || reservedName(name) {
		return errorf(ErrAccessRefused, "operation not permitted on exchange '%s' in vhost '%s'", name, v.cfg.Name)
	}
	if _, ok := v.routes.Exchange(name); !ok {
		return errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", name, v.cfg.Name)
	}
	if ifUnused && v.routes.HasBindingsFrom(name) {
		return errorf(ErrPrecondition, "exchange '%s' in vhost '%s' in use", name, v.cfg.Name)
	}
	if err := v.cfg.Meta.DeleteExchange(ctx, v.cfg.Name, name); err != nil {
		return fmt.Errorf("delete exchange %q: %w", name, err)
	}
	return nil
}

// Bind adds a binding; source and destination must exist. It is a
// metadata write; the routing table follows the event.
func (v *Vhost) Bind(ctx context.Context, b routing.Binding) error {
	if err := v.checkBinding(ctx, b); err != nil {
		return err
	}
	if err := v.cfg.Meta.PutBinding(ctx, bindingToMeta(v.cfg.Name, b)); err != nil {
		return fromMeta(err, "bind")
	}
	return nil
}

// Unbind removes a binding (an absent one is no error).
func (v *Vhost) Unbind(ctx context.Context, b routing.Binding) error {
	if err := v.checkBinding(ctx, b); err != nil {
		return err
	}
	if err := v.cfg.Meta.DeleteBinding(ctx, bindingToMeta(v.cfg.Name, b)); err != nil {
		return fromMeta(err, "unbind")
	}
	return nil
}

// checkBinding validates both ends.
func (v *Vhost) checkBinding(ctx context.Context, b routing.Binding) error {
	if _, ok := v.routes.Exchange(b.Source); !ok {
		return errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", b.Source, v.cfg.Name)
	}
	if b.Source == "" {
		return errorf(ErrAccessRefused, "operation not permitted on the default exchange")
	}
	if b.ToExchange {
		if _, ok := v.routes.Exchange(b.Destination); !ok {
			return errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", b.Destination, v.cfg.Name)
		}
		return nil
	}
	_, err := v.heldEntry(ctx, b.Destination)
	return err
}

// Route resolves an exchange and routing key to queues, appending to dst.
// Routing reads the lock-free snapshot; the queue lookup takes a read lock.
// A queue another node holds is its proxy (Config.Remote); without one,
// dst has the local queues and the error is an ErrRemote naming the node.
// A queue still opening is waited for, at most until ctx ends (ctx's
// error then, with dst as routed so far).
func (v *Vhost) Route(ctx context.Context, exchange, key string, headers map[string]any, dst []queue.Queue) ([]queue.Queue, error) {
	var namesBuf [8]string
	names, err := v.routes.Route(exchange, key, headers, namesBuf[:0])
	if err != nil {
		return dst, errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", exchange, v.cfg.Name)
	}
	if len(names) == 0 {
		return dst, nil
	}
	var remote *queueEntry
	var opening []*queueEntry
	v.mu.RLock()
	for _, n := range names {
		if e, ok := v.queues[n]; ok {
			if e.q != nil {
				dst = append(dst, e.q)
			} else if e.proxy != nil {
				dst = append(dst, e.proxy)
			} else if e.remote {
				remote = e
			} else if e.opening != nil {
				opening = append(opening, e)
			}
		}
	}
	v.mu.RUnlock()
	// A queue declared a moment ago may still be opening: the publish
	// waits for it rather than miss it.
	for _, e := range opening {
		if err := v.waitOpen(ctx, e); err != nil {
			return dst, err
		}
		if e.q != nil {
			dst = append(dst, e.q)
		}
	}
	if remote != nil {
		return dst, v.remoteErr(remote)
	}
	return dst, nil
}
