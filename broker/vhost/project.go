package vhost

import (
	"context"
	"errors"
	"fmt"

	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
)

// The projection: the vhost's exchanges, bindings and queues change only
// here, when the metadata says so (recover at Open, then onEvent).

// onEvent applies one metadata event of this vhost. It runs on the
// writer's goroutine (meta.Local) or the store's apply loop, with the
// store's apply lock held: it must not write metadata.
func (v *Vhost) onEvent(e meta.Event) {
	if e.Vhost != v.cfg.Name && e.Kind != meta.Reset {
		return
	}
	v.projMu.Lock()
	defer v.projMu.Unlock()
	ctx := context.Background()
	switch e.Kind {
	case meta.Reset:
		v.resync(ctx)
	case meta.ExchangePut:
		if e.Cmd.Exchange != nil {
			v.exchangePut(*e.Cmd.Exchange)
		}
	case meta.ExchangeDeleted:
		// The routing table cascades as meta did: bindings from and to
		// it, auto-delete exchanges left without bindings.
		_, _, _ = v.routes.DeleteExchangeCascade(e.Name, false)
	case meta.BindingPut:
		if e.Cmd.Binding != nil {
			if err := v.routes.Bind(bindingFromMeta(*e.Cmd.Binding)); err != nil {
				v.log.Warn("metadata binding not applied", "source", e.Cmd.Binding.Source, "destination", e.Cmd.Binding.Destination, "err", err)
			}
		}
	case meta.BindingDeleted:
		if e.Cmd.Binding != nil {
			_ = v.routes.Unbind(bindingFromMeta(*e.Cmd.Binding))
		}
	case meta.QueuePut:
		if e.Cmd.Queue != nil {
			v.queuePut(ctx, *e.Cmd.Queue, true, true)
		}
	case meta.QueueDeleted:
		v.queueDeleted(ctx, e.Name)
	}
}

// recover builds the vhost from the metadata's current state.
func (v *Vhost) recover(ctx context.Context) error {
	v.projMu.Lock()
	defer v.projMu.Unlock()
	for _, e := range v.cfg.Meta.Exchanges(v.cfg.Name) {
		v.exchangePut(e)
	}
	for _, mq := range v.cfg.Meta.Queues(v.cfg.Name) {
		if err := v.queuePut(ctx, mq, false, false); err != nil {
			return fmt.Errorf("vhost %q: recover queue %q: %w", v.cfg.Name, mq.Name, err)
		}
	}
	var bs []routing.Binding
	for _, b := range v.cfg.Meta.Bindings(v.cfg.Name) {
		bs = append(bs, bindingFromMeta(b))
	}
	if err := v.routes.BindAll(bs); err != nil {
		// Fall back to one at a time so one bad binding does not drop the rest.
		for _, b := range bs {
			if err := v.routes.Bind(b); err != nil {
				v.log.Warn("skipping stored binding", "source", b.Source, "destination", b.Destination, "err", err)
			}
		}
	}
	v.store.RecoveryDone()
	return nil
}

// resync brings the vhost to the store's state after a Reset (a replicated
// store installed a snapshot): exchanges, queues and bindings the state
// no longer has go (a queue held here is deleted, files and all: the
// metadata is the truth), those it has are added or updated.
func (v *Vhost) resync(ctx context.Context) {
	wantX := map[string]meta.Exchange{}
	for _, x := range v.cfg.Meta.Exchanges(v.cfg.Name) {
		wantX[x.Name] = x
	}
	for _, have := range v.routes.Exchanges() {
		if have.Name == "" || reservedName(have.Name) {
			continue // built in
		}
		if w, ok := wantX[have.Name]; !ok || meta.CheckExchangeEquivalent(exchangeToMeta(v.cfg.Name, have), w) != nil {
			_, _, _ = v.routes.DeleteExchangeCascade(have.Name, false)
		}
	}
	for _, x := range wantX {
		v.exchangePut(x)
	}
	wantQ := map[string]meta.Queue{}
	for _, q := range v.cfg.Meta.Queues(v.cfg.Name) {
		wantQ[q.Name] = q
	}
	v.mu.RLock()
	var gone []string
	for name := range v.queues {
		if _, ok := wantQ[name]; !ok {
			gone = append(gone, name)
		}
	}
	v.mu.RUnlock()
	for _, name := range gone {
		v.queueDeleted(ctx, name)
	}
	for _, q := range wantQ {
		if err := v.queuePut(ctx, q, true, false); err != nil {
			v.log.Warn("resync queue", "queue", q.Name, "err", err)
		}
	}
	var wantB []routing.Binding
	for _, b := range v.cfg.Meta.Bindings(v.cfg.Name) {
		wantB = append(wantB, bindingFromMeta(b))
	}
	for _, have := range v.routes.Bindings() {
		if !containsBinding(wantB, have) {
			_ = v.routes.Unbind(have)
		}
	}
	if err := v.routes.BindAll(wantB); err != nil {
		v.log.Warn("resync bindings", "err", err)
	}
}

func containsBinding(bs []routing.Binding, b routing.Binding) bool {
	for _, have := range bs {
		if have.Source == b.Source && have.Destination == b.Destination && have.ToExchange == b.ToExchange && have.Key == b.Key && meta.SameArg(have.Args, b.Args) {
			return true
		}
	}
	return false
}

func (v *Vhost) exchangePut(e meta.Exchange) {
	kind, err := routing.ParseKind(e.Type)
	if err != nil {
		v.log.Warn("skipping stored exchange with unknown type", "exchange", e.Name, "type", e.Type)
		return
	}
	if _, _, err := v.routes.DeclareExchange(exchangeFromMeta(e, kind)); err != nil {
		v.log.Warn("metadata exchange not applied", "exchange", e.Name, "err", err)
	}
}

// local reports whether rec places the queue on this node (a record
// without a node predates placement: this node's).
func (v *Vhost) local(rec meta.Queue) bool { return rec.Node == "" || rec.Node == v.cfg.Node }

// queuePut adds a queue the metadata lists: opened when this node holds
// it, known to routing either way. A queue already known keeps running
// with its record updated. During recovery (fresh false) an open error is
// returned (the vhost does not start); from an event it is kept in the
// entry, for the declare that wrote the record to report and undo. With
// async (a metadata event) a queue held here is known to routing at once
// and opened by the vhost's pool of openers (see startOpen): the store's apply
// goroutine does not wait for the queue's files, and declares on this
// node open their queues in parallel.
func (v *Vhost) queuePut(ctx context.Context, rec meta.Queue, fresh, async bool) error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	if e, ok := v.queues[rec.Name]; ok {
		if e.remote && e.rec.Node != rec.Node && !v.local(rec) {
			e.proxy = v.proxy(rec)
		}
		e.rec = rec
		v.mu.Unlock()
		return nil
	}
	if async && v.local(rec) {
		v.startOpen(rec)
		v.mu.Unlock()
		return nil
	}
	v.mu.Unlock()
	e := &queueEntry{rec: rec, remote: !v.local(rec)}
	if e.remote {
		e.proxy = v.proxy(rec)
	}
	if !e.remote {
		e.q, e.openErr = v.openRecord(ctx, rec)
		if e.openErr != nil && !fresh {
			if errors.Is(e.openErr, ErrPrecondition) {
				// Arguments this node cannot open (e.g. an unknown type):
				// keep the rest of the vhost.
				v.log.Warn("skipping stored queue", "queue", rec.Name, "err", e.openErr)
				return nil
			}
			return e.openErr
		}
	}
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		if e.q != nil {
			_ = e.q.Close(ctx)
		}
		return nil
	}
	v.queues[rec.Name] = e
	if e.openErr == nil {
		v.routes.AddQueue(rec.Name)
	}
	v.mu.Unlock()
	if fresh && e.q != nil {
		v.cfg.Churn.QueuesCreated.Add(1)
	}
	return nil
}

// queueDeleted removes a queue the metadata no longer lists, with its
// bindings, and deletes its files when this node held it.
func (v *Vhost) queueDeleted(ctx context.Context, name string) {
	v.mu.Lock()
	e, ok := v.queues[name]
	if !ok {
		v.mu.Unlock()
		return
	}
	delete(v.queues, name)
	// Its bindings went in meta's cascade; auto-delete exchanges too.
	v.routes.RemoveQueue(name)
	v.mu.Unlock()
	q, _ := e.wait(ctx)
	if q == nil {
		return
	}
	v.cfg.Churn.QueuesDeleted.Add(1)
	n, err := q.Delete(ctx, false, false)
	if err != nil {
		err = fmt.Errorf("delete queue %q: %w", name, err)
	}
	v.mu.Lock()
	e.deletedMsgs, e.deleteErr = n, err
	v.mu.Unlock()
}

// proxy is the forwarding proxy of a queue another node holds (nil when
// this node does not forward).
func (v *Vhost) proxy(rec meta.Queue) queue.Queue {
	if v.cfg.Remote == nil {
		return nil
	}
	typ := rec.Type
	if typ == "" {
		typ = "classic"
	}
	return v.cfg.Remote.Queue(queue.Info{Vhost: v.cfg.Name, Name: rec.Name, Type: typ, Durable: rec.Durable, AutoDelete: rec.AutoDelete, Exclusive: rec.Exclusive, Args: rec.Arguments}, rec.Node)
}

// openRecord opens a queue this node holds with its type's opener.
func (v *Vhost) openRecord(ctx context.Context, rec meta.Queue) (queue.Queue, error) {
	args, err := queue.ParseArgs(rec.Arguments)
	if err != nil {
		return nil, errorf(ErrPrecondition, "%s", trimKind(err))
	}
	typ := rec.Type
	if typ == "" {
		typ = "classic"
	}
	qt, err := v.cfg.QueueTypes.lookup(typ)
	if err != nil {
		return nil, err
	}
	info := queue.Info{Vhost: v.cfg.Name, Name: rec.Name, Type: typ, Durable: rec.Durable, AutoDelete: rec.AutoDelete, Exclusive: rec.Exclusive, Args: rec.Arguments}
	return qt.Open(ctx, v, info, args)
}
