package vhost

import (
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
)

// CheckQueueDecl reports the error DeclareQueue would return for d in the
// vhost named vhost, whose default queue type is defaultType, declaring
// nothing: have is the queue that holds d's name there (nil if none).
// Definitions imports check every item this way before they change
// anything.
func CheckQueueDecl(vhost, defaultType string, have *queue.Info, d QueueDecl) error {
	if have != nil {
		return equivalentQueue(vhost, *have, d)
	}
	if reservedName(d.Name) {
		return errorf(ErrAccessRefused, "queue name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	args, err := queue.ParseArgs(d.Args)
	if err != nil {
		return errorf(ErrPrecondition, "%s", trimKind(err))
	}
	qtype := args.QueueType
	if qtype == "" {
		qtype = defaultType
	}
	switch qtype {
	case "", "classic", "stream":
	default: // as openQueue refuses it
		return errorf(ErrPrecondition, "queue type '%s' is not supported by this node yet", qtype)
	}
	return nil
}

// CheckExchangeDecl reports the error DeclareExchange would return for d
// against routes, a scratch copy of the vhost's exchanges: d is declared in
// it (so the items after d see it), never in the vhost.
func CheckExchangeDecl(vhost string, routes *routing.Table, d ExchangeDecl) error {
	if d.Name == "" {
		return errorf(ErrAccessRefused, "operation not permitted on the default exchange")
	}
	kind, err := routing.ParseKind(d.Type)
	if err != nil {
		return errorf(ErrCommandInvalid, "invalid exchange type '%s'", d.Type)
	}
	_, exists := routes.Exchange(d.Name)
	if !exists && reservedName(d.Name) {
		return errorf(ErrAccessRefused, "exchange name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	a, hasAE := d.Args["alternate-exchange"]
	ae, isString := a.(string)
	if !exists && hasAE && !isString {
		return errorf(ErrPrecondition, "invalid type '%T' for arg 'alternate-exchange' in exchange '%s' in vhost '%s'", a, d.Name, vhost)
	}
	existing, _, err := routes.DeclareExchange(routing.Exchange{Name: d.Name, Kind: kind, Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal, Args: d.Args, AlternateExchange: ae})
	if err != nil {
		return errorf(ErrPrecondition, "inequivalent arg for exchange '%s' in vhost '%s': %s (current type '%s', durable %v)", d.Name, vhost, err, existing.Kind, existing.Durable)
	}
	return nil
}
