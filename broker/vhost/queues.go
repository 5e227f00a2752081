package vhost

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	// Authorize, when set, is called before a new queue is recorded
	// (never for one the vhost has), under no vhost lock, with its name
	// (server-generated when the declare named none) and its parsed
	// arguments; an error refuses the declare and is returned as is. A
	// protocol checks here what only a new queue needs: configure on a
	// generated name, write on the dead-letter exchange. A declare racing
	// another of the same name may be authorized and then find the queue
	// made: it never creates one unauthorized.
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
// It returns the queue and whether it was created. A new queue is a
// metadata write (meta.Store.DeclareQueue, arbitrated by the state machine
// so concurrent declares of one name agree); the queue is opened by the
// event handler before the write returns.
func (v *Vhost) DeclareQueue(ctx context.Context, d QueueDecl) (queue.Queue, bool, error) {
	serverNamed := d.Name == "" && !d.Passive
	if serverNamed {
		d.Name = NewServerName()
	}
	if v.isClosed() {
		return nil, false, ErrClosed
	}
	if e, ok := v.entry(d.Name); ok {
		return v.redeclare(ctx, e, d)
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
	qtype := args.QueueType
	if qtype == "" {
		qtype = v.Settings().DefaultQueueType
	}
	if err := v.cfg.QueueTypes.check(qtype, args); err != nil {
		return nil, false, err
	}
	if d.Authorize != nil {
		if err := d.Authorize(d.Name, args); err != nil {
			return nil, false, err
		}
	}
	rec := v.declRecord(d)
	rec.Type = qtype
	created, err := v.cfg.Meta.DeclareQueue(ctx, rec)
	if err != nil {
		return nil, false, fromMeta(err, "declare queue '%s'", d.Name)
	}
	e, ok := v.entry(d.Name)
	if !ok { // deleted again before we looked
		return nil, false, errorf(ErrNotFound, "no queue '%s' in vhost '%s'", d.Name, v.cfg.Name)
	}
	if !created { // another declare made it first, equivalent
		return v.redeclare(ctx, e, d)
	}
	if e.remote {
		return nil, false, v.remoteErr(e)
	}
	// The apply goroutine started the open (startOpen): answer once it is
	// done, so the client finds the queue open.
	q, openErr := e.wait(ctx)
	if openErr != nil {
		if errors.Is(openErr, ctx.Err()) || errors.Is(openErr, ErrClosed) {
			// Not an open that failed: the record stays (a vhost
			// closed before the open started recovers it at its next
			// Open).
			return nil, false, openErr
		}
		if err := v.cfg.Meta.DeleteQueue(ctx, v.cfg.Name, d.Name); err != nil {
			v.log.Warn("forget queue that failed to open", "queue", d.Name, "err", err)
		}
		return nil, false, openErr
	}
	v.cfg.Churn.QueuesDeclared.Add(1)
	return q, true, nil
}

// declRecord is the metadata record a declare asks for. Owner is the
// declaring connection on this node (the state machine keeps it only for an
// exclusive queue, and checks it against an existing exclusive one).
func (v *Vhost) declRecord(d QueueDecl) meta.Queue {
	rec := meta.Queue{Vhost: v.cfg.Name, Name: d.Name, Durable: d.Durable, AutoDelete: d.AutoDelete, Exclusive: d.Exclusive, Arguments: d.Args, Node: v.cfg.Node}
	if d.Owner != 0 {
		rec.Owner = &meta.QueueOwner{Node: v.cfg.Node, Conn: d.Owner}
	}
	return rec
}

// redeclare answers a declare of a queue the vhost has.
func (v *Vhost) redeclare(ctx context.Context, e *queueEntry, d QueueDecl) (queue.Queue, bool, error) {
	if v.lockedFor(e, d.Owner) {
		return nil, false, v.lockedErr(d.Name)
	}
	q, openErr := e.wait(ctx)
	if q == nil {
		if openErr != nil {
			return nil, false, openErr
		}
		if e.proxy != nil {
			return v.redeclareRemote(e, d)
		}
		return nil, false, v.remoteErr(e)
	}
	if d.Passive {
		return q, false, nil
	}
	if err := meta.CheckQueueEquivalent(e.rec, v.declRecord(d)); err != nil {
		return nil, false, fromMeta(err, "declare queue '%s'", d.Name)
	}
	if t, ok := q.(interface{ Touch() }); ok {
		t.Touch()
	}
	v.cfg.Churn.QueuesDeclared.Add(1)
	return q, false, nil
}

// redeclareRemote answers a declare of a queue another node holds from its
// record, with the counts asked of the owner: an owner that does not
// answer makes it NOT_FOUND (home node down), as with RabbitMQ.
func (v *Vhost) redeclareRemote(e *queueEntry, d QueueDecl) (queue.Queue, bool, error) {
	if !d.Passive {
		if err := meta.CheckQueueEquivalent(e.rec, v.declRecord(d)); err != nil {
			return nil, false, fromMeta(err, "declare queue '%s'", d.Name)
		}
	}
	rs, ok := e.proxy.(remoteStats)
	if !ok {
		return e.proxy, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteDeclareTimeout)
	defer cancel()
	st, err := rs.StatsContext(ctx)
	if err != nil {
		return nil, false, err
	}
	v.cfg.Churn.QueuesDeclared.Add(1)
	return declared{Queue: e.proxy, st: st}, false, nil
}

// remoteDeclareTimeout bounds the owner's answer to a declare.
const remoteDeclareTimeout = 5 * time.Second

// declared is a remote queue with the counts its declare got.
type declared struct {
	queue.Queue
	st queue.Stats
}

func (d declared) Stats() queue.Stats { return d.st }

func (v *Vhost) isClosed() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.closed
}

func (v *Vhost) entry(name string) (*queueEntry, bool) {
	v.mu.RLock()
	e, ok := v.queues[name]
	v.mu.RUnlock()
	return e, ok
}

// lockedFor reports whether the entry is an exclusive queue of a
// connection other than owner (a connection of this node; 0: none).
func (v *Vhost) lockedFor(e *queueEntry, owner uint64) bool {
	return e.rec.LockedFor(&meta.QueueOwner{Node: v.cfg.Node, Conn: owner})
}

func (v *Vhost) lockedErr(name string) error {
	return errorf(ErrResourceLocked, "%s", meta.LockedQueueText(v.cfg.Name, name))
}

// remoteErr is the answer where a queue another node holds would be used
// here: this node does not forward to other nodes yet.
func (v *Vhost) remoteErr(e *queueEntry) error {
	return errorf(ErrRemote, "queue '%s' in vhost '%s' is on node '%s'; this node does not forward to it", e.rec.Name, v.cfg.Name, e.rec.Node)
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

// Queue looks a queue up, waiting for its open when one is under way (at
// most until ctx ends: ctx's error then). An exclusive queue of another
// connection is resource-locked; pass owner 0 to skip that check. A queue
// another node holds is an ErrRemote.
func (v *Vhost) Queue(ctx context.Context, name string, owner uint64) (queue.Queue, error) {
	e, err := v.heldEntry(ctx, name)
	if err != nil {
		return nil, err
	}
	if owner != 0 && v.lockedFor(e, owner) {
		return nil, v.lockedErr(name)
	}
	if e.proxy != nil {
		return e.proxy, nil
	}
	if e.remote {
		return nil, v.remoteErr(e)
	}
	return e.q, nil // opened: held waited for it
}

// heldEntry is the entry of queue name if it stands for a queue: held by
// another node, or open here (after waiting for an open under way, at most
// until ctx ends: an error then); NOT_FOUND for none, or for one that
// failed to open.
func (v *Vhost) heldEntry(ctx context.Context, name string) (*queueEntry, error) {
	e, ok := v.entry(name)
	if ok && !e.remote {
		if err := v.waitOpen(ctx, e); err != nil {
			return nil, err
		}
	}
	if !ok || !e.remote && e.q == nil {
		return nil, errorf(ErrNotFound, "no queue '%s' in vhost '%s'", name, v.cfg.Name)
	}
	return e, nil
}

// LocalQueue is a queue this node holds (NOT_FOUND for any other: the
// serving side of forwarding), after its open when one is under way.
func (v *Vhost) LocalQueue(name string) (queue.Queue, error) {
	return v.LocalQueueContext(context.Background(), name)
}

// LocalQueueContext is LocalQueue waiting for an open under way at most
// until ctx ends (ctx's error then).
func (v *Vhost) LocalQueueContext(ctx context.Context, name string) (queue.Queue, error) {
	e, ok := v.entry(name)
	if !ok || e.remote {
		return nil, v.notLocal(name)
	}
	if err := v.waitOpen(ctx, e); err != nil {
		return nil, err
	}
	q, _ := e.wait(ctx)
	if q == nil {
		return nil, v.notLocal(name)
	}
	return q, nil
}

// waitOpen waits for the open under way of a queue held here, if any, at
// most until ctx ends; the error is then ctx's, wrapped.
func (v *Vhost) waitOpen(ctx context.Context, e *queueEntry) error {
	if _, err := e.wait(ctx); err != nil && err == ctx.Err() {
		return fmt.Errorf("queue '%s' in vhost '%s': waiting for its open: %w", e.rec.Name, v.cfg.Name, err)
	}
	return nil
}

// LocalQueueIfOpen is LocalQueue without waiting: ready is false (and
// the queue nil) while the queue's open is under way; otherwise it is
// LocalQueue's answer. It never blocks on a file: for callers that must
// not wait (a peer's data-stream reader).
func (v *Vhost) LocalQueueIfOpen(name string) (q queue.Queue, ready bool, err error) {
	e, ok := v.entry(name)
	if !ok || e.remote {
		return nil, true, v.notLocal(name)
	}
	if e.opening != nil {
		select {
		case <-e.opening:
		default:
			return nil, false, nil
		}
	}
	if e.q == nil {
		return nil, true, v.notLocal(name)
	}
	return e.q, true, nil
}

func (v *Vhost) notLocal(name string) error {
	return errorf(ErrNotFound, "no queue '%s' in vhost '%s' on node '%s'", name, v.cfg.Name, v.cfg.Node)
}

// QueueRecord is a queue's metadata record, wherever it is held, checked
// as Queue checks it (not found; locked for owner unless 0; an open under
// way waited for until ctx ends). Use it where the queue itself is not
// needed (a binding).
func (v *Vhost) QueueRecord(ctx context.Context, name string, owner uint64) (meta.Queue, error) {
	e, err := v.heldEntry(ctx, name)
	if err != nil {
		return meta.Queue{}, err
	}
	if owner != 0 && v.lockedFor(e, owner) {
		return meta.Queue{}, v.lockedErr(name)
	}
	return e.rec, nil
}

// Queues lists the queues this node holds in the vhost.
func (v *Vhost) Queues() []queue.Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]queue.Queue, 0, len(v.queues))
	for _, e := range v.queues {
		if e.q != nil {
			out = append(out, e.q)
		}
	}
	return out
}

// DeleteQueue deletes a queue and returns the number of messages it held.
// The delete is a metadata write; the event handler closes the queue and
// removes its files before the write returns.
func (v *Vhost) DeleteQueue(ctx context.Context, name string, o QueueDeleteOptions) (int, error) {
	if v.isClosed() {
		return 0, ErrClosed
	}
	e, err := v.heldEntry(ctx, name)
	if err != nil {
		return 0, err
	}
	if !o.Force && v.lockedFor(e, o.Owner) {
		return 0, v.lockedErr(name)
	}
	if e.proxy != nil {
		// The owner checks the conditions, deletes and counts.
		n, err := e.proxy.Delete(ctx, o.IfUnused, o.IfEmpty)
		if err == nil || !errors.Is(err, ErrNotFound) {
			return n, err
		}
		if !v.nodeDown(e.rec.Node) {
			// One failed call (a link reset, a timeout) is not its node
			// down: ask once more, and force nothing while the transport
			// still reports the node up.
			n, err = e.proxy.Delete(ctx, o.IfUnused, o.IfEmpty)
			if err == nil || !errors.Is(err, ErrNotFound) || !v.nodeDown(e.rec.Node) {
				return n, err
			}
		}
		// Its node is down. As RabbitMQ's classic
		// queues: with if-empty the delete is refused (the queue may hold
		// messages); otherwise the record goes, if-unused too (nobody can
		// be using it), and delete-ok counts no message.
		if o.IfEmpty {
			v.log.Error("delete queue: its node is down and it may hold messages; refusing to force-delete it (if-empty)", "queue", name, "node", e.rec.Node)
			return 0, errorf(ErrPrecondition, "queue '%s' in vhost '%s' not empty: its home node '%s' is down or inaccessible and it may hold messages", name, v.cfg.Name, e.rec.Node)
		}
		v.log.Warn("delete queue: its node is down; forcing the deletion of its record (its messages there are lost)", "queue", name, "node", e.rec.Node, "err", err)
	} else if o.IfUnused || o.IfEmpty {
		if e.remote {
			return 0, v.remoteErr(e)
		}
		q, _ := e.wait(ctx)
		st := q.Stats()
		if o.IfUnused && st.Consumers > 0 {
			return 0, errorf(ErrPrecondition, "queue '%s' in vhost '%s' in use", name, v.cfg.Name)
		}
		if o.IfEmpty && st.Ready+st.Unacked > 0 {
			return 0, errorf(ErrPrecondition, "queue '%s' in vhost '%s' is not empty", name, v.cfg.Name)
		}
	}
	if err := v.cfg.Meta.DeleteQueue(ctx, v.cfg.Name, name); err != nil {
		return 0, fmt.Errorf("delete queue %q: %w", name, err)
	}
	v.mu.RLock()
	n, err := e.deletedMsgs, e.deleteErr
	v.mu.RUnlock()
	return n, err
}

// nodeDown reports whether the transport reports node down.
func (v *Vhost) nodeDown(node string) bool {
	return v.cfg.NodeDown != nil && v.cfg.NodeDown(node)
}

// ConnectionClosed deletes the exclusive queues owned by a connection of
// this node.
func (v *Vhost) ConnectionClosed(ctx context.Context, owner uint64) {
	me := meta.QueueOwner{Node: v.cfg.Node, Conn: owner}
	v.mu.RLock()
	var names []string
	for name, e := range v.queues {
		if e.rec.Exclusive && e.rec.Owner != nil && *e.rec.Owner == me {
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
