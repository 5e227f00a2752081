package vhost

import (
	"context"
	"errors"
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
	// Authorize, when set, is called under the vhost's lock before a new
	// exchange is created (never for one that exists), with its
	// alternate-exchange argument ("" if none); an error refuses the
	// declare and is returned as is.
	Authorize func(alternate string) error
}

// DeclareExchange creates an exchange or checks an existing one is equivalent.
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
	if _, exists := v.routes.Exchange(d.Name); !exists && reservedName(d.Name) {
		return errorf(ErrAccessRefused, "exchange name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	ae, _ := d.Args["alternate-exchange"].(string)
	e := routing.Exchange{Name: d.Name, Kind: kind, Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal, Args: d.Args, AlternateExchange: ae}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, exists := v.routes.Exchange(d.Name); !exists {
		if a, ok := d.Args["alternate-exchange"]; ok {
			if _, isString := a.(string); !isString {
				return errorf(ErrPrecondition, "invalid type '%T' for arg 'alternate-exchange' in exchange '%s' in vhost '%s'", a, d.Name, v.cfg.Name)
			}
		}
		if d.Authorize != nil {
			if err := d.Authorize(ae); err != nil {
				return err
			}
		}
	}
	existing, created, err := v.routes.DeclareExchange(e)
	if err != nil {
		return errorf(ErrPrecondition, "inequivalent arg for exchange '%s' in vhost '%s': %s (current type '%s', durable %v)", d.Name, v.cfg.Name, err, existing.Kind, existing.Durable)
	}
	if created && d.Durable {
		if err := v.cfg.Meta.PutExchange(ctx, meta.Exchange{Vhost: v.cfg.Name, Name: d.Name, Type: d.Type, Durable: true, AutoDelete: d.AutoDelete, Internal: d.Internal, Arguments: d.Args}); err != nil {
			_ = v.routes.DeleteExchange(d.Name, false)
			return fmt.Errorf("store exchange %q: %w", d.Name, err)
		}
	}
	return nil
}

// Exchange looks an exchange up.
func (v *Vhost) Exchange(name string) (routing.Exchange, error) {
	e, ok := v.routes.Exchange(name)
	if !ok {
		return e, errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", name, v.cfg.Name)
	}
	return e, nil
}

// DeleteExchange deletes an exchange and its bindings.
func (v *Vhost) DeleteExchange(ctx context.Context, name string, ifUnused bool) error {
	if name == "" || reservedName(name) {
		return errorf(ErrAccessRefused, "operation not permitted on exchange '%s' in vhost '%s'", name, v.cfg.Name)
	}
	v.mu.Lock()
	e, ok := v.routes.Exchange(name)
	if !ok {
		v.mu.Unlock()
		return errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", name, v.cfg.Name)
	}
	if err := v.routes.DeleteExchange(name, ifUnused); err != nil {
		v.mu.Unlock()
		if errors.Is(err, routing.ErrInUse) {
			return errorf(ErrPrecondition, "exchange '%s' in vhost '%s' in use", name, v.cfg.Name)
		}
		return errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", name, v.cfg.Name)
	}
	v.mu.Unlock()
	// The stored exchange's bindings go with it (meta cascades the delete).
	if e.Durable {
		if err := v.cfg.Meta.DeleteExchange(ctx, v.cfg.Name, name); err != nil {
			return fmt.Errorf("delete stored exchange %q: %w", name, err)
		}
	}
	return nil
}

// Bind adds a binding; source and destination must exist.
func (v *Vhost) Bind(ctx context.Context, b routing.Binding) error {
	durable, err := v.checkBinding(b)
	if err != nil {
		return err
	}
	if err := v.routes.Bind(b); err != nil {
		return errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", b.Source, v.cfg.Name)
	}
	if durable {
		if err := v.cfg.Meta.PutBinding(ctx, bindingToMeta(v.cfg.Name, b)); err != nil {
			return fmt.Errorf("store binding: %w", err)
		}
	}
	return nil
}

// Unbind removes a binding.
func (v *Vhost) Unbind(ctx context.Context, b routing.Binding) error {
	durable, err := v.checkBinding(b)
	if err != nil {
		return err
	}
	if err := v.routes.Unbind(b); err != nil && !errors.Is(err, routing.ErrNotFound) {
		return fmt.Errorf("unbind: %w", err)
	}
	if durable {
		if err := v.cfg.Meta.DeleteBinding(ctx, bindingToMeta(v.cfg.Name, b)); err != nil {
			v.log.Debug("delete stored binding", "err", err)
		}
	}
	return nil
}

// checkBinding validates both ends and reports whether the binding is durable
// (both ends durable).
func (v *Vhost) checkBinding(b routing.Binding) (bool, error) {
	src, ok := v.routes.Exchange(b.Source)
	if !ok {
		return false, errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", b.Source, v.cfg.Name)
	}
	if b.Source == "" {
		return false, errorf(ErrAccessRefused, "operation not permitted on the default exchange")
	}
	if b.ToExchange {
		dst, ok := v.routes.Exchange(b.Destination)
		if !ok {
			return false, errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", b.Destination, v.cfg.Name)
		}
		return src.Durable && dst.Durable, nil
	}
	v.mu.RLock()
	e, ok := v.queues[b.Destination]
	v.mu.RUnlock()
	if !ok {
		return false, errorf(ErrNotFound, "no queue '%s' in vhost '%s'", b.Destination, v.cfg.Name)
	}
	info := e.q.Info()
	return src.Durable && info.Durable && !info.Exclusive, nil
}

func (v *Vhost) forgetExchanges(ctx context.Context, names []string) {
	for _, name := range names {
		if err := v.cfg.Meta.DeleteExchange(ctx, v.cfg.Name, name); err != nil {
			v.log.Debug("delete stored auto-delete exchange", "exchange", name, "err", err)
		}
	}
}

// Route resolves an exchange and routing key to queues, appending to dst.
// Routing reads the lock-free snapshot; the queue lookup takes a read lock.
func (v *Vhost) Route(exchange, key string, headers map[string]any, dst []queue.Queue) ([]queue.Queue, error) {
	var namesBuf [8]string
	names, err := v.routes.Route(exchange, key, headers, namesBuf[:0])
	if err != nil {
		return dst, errorf(ErrNotFound, "no exchange '%s' in vhost '%s'", exchange, v.cfg.Name)
	}
	if len(names) == 0 {
		return dst, nil
	}
	v.mu.RLock()
	for _, n := range names {
		if e, ok := v.queues[n]; ok {
			dst = append(dst, e.q)
		}
	}
	v.mu.RUnlock()
	return dst, nil
}
