package vhost

import (
	"github.com/warrenmq/warren/broker/meta"
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
		h := meta.Queue{Vhost: vhost, Name: have.Name, Durable: have.Durable, AutoDelete: have.AutoDelete, Exclusive: have.Exclusive, Arguments: have.Args}
		w := meta.Queue{Vhost: vhost, Name: d.Name, Durable: d.Durable, AutoDelete: d.AutoDelete, Exclusive: d.Exclusive, Arguments: d.Args}
		return fromMeta(meta.CheckQueueEquivalent(h, w), "check queue '%s'", d.Name)
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
	if qtype == "" {
		qtype = "classic"
	}
	return DefaultQueueTypes().check(qtype, args)
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
	if exists {
		have, _ := routes.Exchange(d.Name)
		want := meta.Exchange{Vhost: vhost, Name: d.Name, Type: kind.String(), Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal, Arguments: d.Args}
		return fromMeta(meta.CheckExchangeEquivalent(exchangeToMeta(vhost, have), want), "check exchange '%s'", d.Name)
	}
	_, _, _ = routes.DeclareExchange(routing.Exchange{Name: d.Name, Kind: kind, Durable: d.Durable, AutoDelete: d.AutoDelete, Internal: d.Internal, Args: d.Args, AlternateExchange: ae})
	return nil
}
