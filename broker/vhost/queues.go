package vhost

import (
	"context"
	"fmt"
	"reflect"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
)

// QueueDecl is a queue.declare as the vhost sees it.
type QueueDecl struct {
	Name       string
	Passive    bool
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       map[string]any
	// Owner is the declaring connection's id (exclusive queues belong to it).
	Owner uint64
	// Authorize, when set, is called under the vhost's lock before a new
	// queue is created (never for one that exists), with its name
	// (server-generated when the declare named none) and its parsed
	// arguments; an error refuses the declare and is returned as is. A
	// protocol checks here what only a new queue needs: configure on a
	// generated name, write on the dead-letter exchange.
	Authorize func(name string, args queue.Args) error
}

// QueueDeleteOptions are queue.delete's conditions.
type QueueDeleteOptions struct {
	IfUnused, IfEmpty bool
	// Owner is the deleting connection; an exclusive queue of another
	// connection is resource-locked.
	Owner uint64
	// Force skips the owner check (auto-delete, x-expires, HTTP API).
	Force bool
}

// DeclareQueue creates a queue or checks an existing one is equivalent.
// It returns the queue and whether it was created.
func (v *Vhost) DeclareQueue(ctx context.Context, d QueueDecl) (queue.Queue, bool, error) {
	serverNamed := d.Name == "" && !d.Passive
	if serverNamed {
		d.Name = NewServerName()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil, false, ErrClosed
	}
	if e, ok := v.queues[d.Name]; ok {
		if e.owner != 0 && e.owner != d.Owner {
			return nil, false, errorf(ErrResourceLocked, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", d.Name, v.cfg.Name)
		}
		if d.Passive {
			return e.q, false, nil
		}
		if err := equivalentQueue(v.cfg.Name, e.q.Info(), d); err != nil {
			return nil, false, err
		}
		if t, ok := e.q.(interface{ Touch() }); ok {
			t.Touch()
		}
		v.cfg.Churn.QueuesDeclared.Add(1)
		return e.q, false, nil
	}
	if d.Passive {
		return nil, false, errorf(ErrNotFound, "no queue '%s' in vhost '%s'", d.Name, v.cfg.Name)
	}
	if !serverNamed && reservedName(d.Name) {
		return nil, false, errorf(ErrAccessRefused, "queue name '%s' contains reserved prefix 'amq.*'", d.Name)
	}
	args, err := queue.ParseArgs(d.Args)
	if err != nil {
		return nil, false, errorf(ErrPrecondition, "%s", trimKind(err))
	}
	if d.Authorize != nil {
		if err := d.Authorize(d.Name, args); err != nil {
			return nil, false, err
		}
	}
	qtype := args.QueueType
	if qtype == "" {
		qtype = v.Settings().DefaultQueueType
	}
	info := queue.Info{Vhost: v.cfg.Name, Name: d.Name, Type: qtype, Durable: d.Durable, AutoDelete: d.AutoDelete, Exclusive: d.Exclusive, Args: d.Args}
	if d.Durable && !d.Exclusive {
		if err := v.cfg.Meta.PutQueue(ctx, meta.Queue{Vhost: v.cfg.Name, Name: d.Name, Type: qtype, Durable: true, AutoDelete: d.AutoDelete, Arguments: d.Args}); err != nil {
			return nil, false, fmt.Errorf("store queue %q: %w", d.Name, err)
		}
	}
	q, err := v.openQueue(ctx, info, args)
	if err != nil {
		if d.Durable && !d.Exclusive {
			_ = v.cfg.Meta.DeleteQueue(ctx, v.cfg.Name, d.Name)
		}
		return nil, false, err
	}
	var owner uint64
	if d.Exclusive {
		owner = d.Owner
	}
	v.queues[d.Name] = &queueEntry{q: q, owner: owner}
	v.routes.AddQueue(d.Name)
	v.cfg.Churn.QueuesDeclared.Add(1)
	v.cfg.Churn.QueuesCreated.Add(1)
	return q, true, nil
}

func trimKind(err error) string {
	s := err.Error()
	for _, p := range []string{"queue: invalid argument: ", "PRECONDITION_FAILED - "} {
		if len(s) > len(p) && s[:len(p)] == p {
			s = s[len(p):]
		}
	}
	return s
}

func equivalentQueue(vhost string, have queue.Info, d QueueDecl) error {
	ineq := func(arg string, got, cur any) error {
		return errorf(ErrPrecondition, "inequivalent arg '%s' for queue '%s' in vhost '%s': received '%v' but current is '%v'", arg, d.Name, vhost, got, cur)
	}
	if have.Durable != d.Durable {
		return ineq("durable", d.Durable, have.Durable)
	}
	if have.AutoDelete != d.AutoDelete {
		return ineq("auto_delete", d.AutoDelete, have.AutoDelete)
	}
	if have.Exclusive != d.Exclusive {
		return ineq("exclusive", d.Exclusive, have.Exclusive)
	}
	for _, k := range []string{"x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes", "x-overflow", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-single-active-consumer", "x-max-priority", "x-queue-type", "x-max-age", "x-stream-max-segment-size-bytes"} {
		a, aok := d.Args[k]
		b, bok := have.Args[k]
		if k == "x-queue-type" && (!aok || !bok) {
			continue
		}
		if aok != bok || (aok && !sameArg(a, b)) {
			return ineq(k, a, b)
		}
	}
	return nil
}

// sameArg compares argument values, treating integer widths as equal.
func sameArg(a, b any) bool {
	ai, aok := message.FieldInt(a)
	bi, bok := message.FieldInt(b)
	if aok && bok {
		return ai == bi
	}
	return reflect.DeepEqual(a, b)
}

// Queue looks a queue up. An exclusive queue of another connection is
// resource-locked; pass owner 0 to skip that check.
func (v *Vhost) Queue(name string, owner uint64) (queue.Queue, error) {
	v.mu.RLock()
	e, ok := v.queues[name]
	v.mu.RUnlock()
	if !ok {
		return nil, errorf(ErrNotFound, "no queue '%s' in vhost '%s'", name, v.cfg.Name)
	}
	if owner != 0 && e.owner != 0 && e.owner != owner {
		return nil, errorf(ErrResourceLocked, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", name, v.cfg.Name)
	}
	return e.q, nil
}

// Queues lists the vhost's queues.
func (v *Vhost) Queues() []queue.Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]queue.Queue, 0, len(v.queues))
	for _, e := range v.queues {
		out = append(out, e.q)
	}
	return out
}

// DeleteQueue deletes a queue and returns the number of messages it held.
func (v *Vhost) DeleteQueue(ctx context.Context, name string, o QueueDeleteOptions) (int, error) {
	v.mu.Lock()
	e, ok := v.queues[name]
	if !ok {
		v.mu.Unlock()
		return 0, errorf(ErrNotFound, "no queue '%s' in vhost '%s'", name, v.cfg.Name)
	}
	if !o.Force && e.owner != 0 && e.owner != o.Owner {
		v.mu.Unlock()
		return 0, errorf(ErrResourceLocked, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", name, v.cfg.Name)
	}
	st := e.q.Stats()
	if o.IfUnused && st.Consumers > 0 {
		v.mu.Unlock()
		return 0, errorf(ErrPrecondition, "queue '%s' in vhost '%s' in use", name, v.cfg.Name)
	}
	if o.IfEmpty && st.Ready+st.Unacked > 0 {
		v.mu.Unlock()
		return 0, errorf(ErrPrecondition, "queue '%s' in vhost '%s' is not empty", name, v.cfg.Name)
	}
	delete(v.queues, name)
	// The stored queue's bindings go with it (meta cascades the delete).
	_, autoDeleted := v.routes.RemoveQueue(name)
	v.mu.Unlock()
	v.cfg.Churn.QueuesDeleted.Add(1)

	info := e.q.Info()
	if info.Durable && !info.Exclusive {
		if err := v.cfg.Meta.DeleteQueue(ctx, v.cfg.Name, name); err != nil {
			v.log.Warn("delete stored queue", "queue", name, "err", err)
		}
	}
	v.forgetExchanges(ctx, autoDeleted)
	n, err := e.q.Delete(ctx, false, false)
	if err != nil {
		return n, fmt.Errorf("delete queue %q: %w", name, err)
	}
	return n, nil
}

// ConnectionClosed deletes the exclusive queues owned by a connection.
func (v *Vhost) ConnectionClosed(ctx context.Context, owner uint64) {
	v.mu.RLock()
	var names []string
	for name, e := range v.queues {
		if e.owner == owner {
			names = append(names, name)
		}
	}
	v.mu.RUnlock()
	for _, name := range names {
		if _, err := v.DeleteQueue(ctx, name, QueueDeleteOptions{Force: true}); err != nil {
			v.log.Debug("delete exclusive queue", "queue", name, "err", err)
		}
	}
}
