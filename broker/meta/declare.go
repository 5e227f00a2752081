package meta

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/warrenmq/warren/broker/message"
)

// Refusals of a declare the state machine arbitrates. They travel in an
// *Error, whose Text is RabbitMQ's wording; a protocol maps the Kind to its
// code (AMQP: 406 and 405).
var (
	// ErrInequivalent: the name is taken by a queue or exchange declared
	// differently.
	ErrInequivalent = errors.New("meta: inequivalent declaration")
	// ErrLocked: the queue is exclusive to another connection.
	ErrLocked = errors.New("meta: locked")
)

// Error is a declare refused by the state machine: a Kind (ErrInequivalent,
// ErrLocked) and RabbitMQ's text. Every node computes the same one.
type Error struct {
	Kind error
	Text string
}

func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Text }

// Unwrap lets errors.Is match the Kind.
func (e *Error) Unwrap() error { return e.Kind }

// QueueOwner is the connection an exclusive queue belongs to: a node and
// that node's connection id.
type QueueOwner struct {
	Node string `json:"node"`
	Conn uint64 `json:"conn"`
}

// queueArgsChecked are the arguments a redeclare must repeat exactly
// (RabbitMQ's equivalence check); x-queue-type only when both give it.
var queueArgsChecked = []string{"x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes", "x-overflow", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-single-active-consumer", "x-max-priority", "x-queue-type", "x-max-age", "x-stream-max-segment-size-bytes"}

// LockedQueueText is RabbitMQ's text for a queue exclusive to another connection.
func LockedQueueText(vhost, name string) string {
	return fmt.Sprintf("cannot obtain exclusive access to locked queue '%s' in vhost '%s'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", name, vhost)
}

// CheckQueueEquivalent reports whether declaring want where have exists is
// a redeclare RabbitMQ accepts: the same durable, auto_delete and exclusive
// flags and the same value for each argument that matters. The error is an
// *Error of Kind ErrInequivalent.
func CheckQueueEquivalent(have, want Queue) error {
	ineq := func(arg string, got, cur any) error {
		return &Error{Kind: ErrInequivalent, Text: fmt.Sprintf("inequivalent arg '%s' for queue '%s' in vhost '%s': received '%v' but current is '%v'", arg, want.Name, want.Vhost, got, cur)}
	}
	if have.Durable != want.Durable {
		return ineq("durable", want.Durable, have.Durable)
	}
	if have.AutoDelete != want.AutoDelete {
		return ineq("auto_delete", want.AutoDelete, have.AutoDelete)
	}
	if have.Exclusive != want.Exclusive {
		return ineq("exclusive", want.Exclusive, have.Exclusive)
	}
	for _, k := range queueArgsChecked {
		a, aok := want.Arguments[k]
		b, bok := have.Arguments[k]
		if k == "x-queue-type" && (!aok || !bok) {
			continue
		}
		if aok != bok || (aok && !SameArg(a, b)) {
			return ineq(k, a, b)
		}
	}
	return nil
}

// LockedFor reports whether the queue is exclusive to a connection other
// than owner (nil: no connection, e.g. the HTTP API).
func (q Queue) LockedFor(owner *QueueOwner) bool {
	if !q.Exclusive || q.Owner == nil {
		return false
	}
	return owner == nil || *owner != *q.Owner
}

// CheckExchangeEquivalent reports whether declaring want where have exists
// is a redeclare RabbitMQ accepts: same type, flags and arguments. The
// error is an *Error of Kind ErrInequivalent.
func CheckExchangeEquivalent(have, want Exchange) error {
	ineq := func(arg string, got, cur any) error {
		return &Error{Kind: ErrInequivalent, Text: fmt.Sprintf("inequivalent arg '%s' for exchange '%s' in vhost '%s': received '%v' but current is '%v'", arg, want.Name, want.Vhost, got, cur)}
	}
	switch {
	case have.Type != want.Type:
		return ineq("type", want.Type, have.Type)
	case have.Durable != want.Durable:
		return ineq("durable", want.Durable, have.Durable)
	case have.AutoDelete != want.AutoDelete:
		return ineq("auto_delete", want.AutoDelete, have.AutoDelete)
	case have.Internal != want.Internal:
		return ineq("internal", want.Internal, have.Internal)
	}
	for k, a := range want.Arguments {
		if b, ok := have.Arguments[k]; !ok || !SameArg(a, b) {
			return ineq(k, a, have.Arguments[k])
		}
	}
	for k, b := range have.Arguments {
		if _, ok := want.Arguments[k]; !ok {
			return ineq(k, nil, b)
		}
	}
	return nil
}

// SameArg compares argument values as RabbitMQ's equivalence check does:
// integers whatever their width (a stored one is an int64, a client sends
// an int32), []byte as the same string, tables and arrays element-wise.
func SameArg(a, b any) bool {
	if ai, ok := message.FieldInt(a); ok {
		bi, ok := message.FieldInt(b)
		return ok && ai == bi
	}
	switch at := a.(type) {
	case []byte:
		if bs, ok := b.(string); ok {
			return string(at) == bs
		}
	case string:
		if bb, ok := b.([]byte); ok {
			return at == string(bb)
		}
	case map[string]any:
		bt, ok := b.(map[string]any)
		if !ok || len(at) != len(bt) {
			return false
		}
		for k, av := range at {
			if bv, ok := bt[k]; !ok || !SameArg(av, bv) {
				return false
			}
		}
		return true
	case []any:
		bt, ok := b.([]any)
		if !ok || len(at) != len(bt) {
			return false
		}
		for i := range at {
			if !SameArg(at[i], bt[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// validateDeclareQueue refuses a declare of a name held by a queue exclusive
// to another connection or declared differently; a declare of a new name
// needs its vhost.
func (s *State) validateDeclareQueue(q *Queue) error {
	if q == nil || q.Name == "" {
		return fmt.Errorf("%w: queue needs a name", ErrInvalid)
	}
	if _, ok := s.Vhosts[q.Vhost]; !ok {
		return fmt.Errorf("%w: vhost '%s'", ErrNotFound, q.Vhost)
	}
	have, ok := s.Queues[key2(q.Vhost, q.Name)]
	if !ok {
		return nil
	}
	if have.LockedFor(q.Owner) {
		return &Error{Kind: ErrLocked, Text: LockedQueueText(q.Vhost, q.Name)}
	}
	return CheckQueueEquivalent(have, *q)
}

// validateDeclareExchange refuses a declare of a name held by an exchange
// declared differently.
func (s *State) validateDeclareExchange(x *Exchange) error {
	if x == nil || x.Name == "" {
		return fmt.Errorf("%w: exchange needs a name", ErrInvalid)
	}
	if _, ok := s.Vhosts[x.Vhost]; !ok {
		return fmt.Errorf("%w: vhost '%s'", ErrNotFound, x.Vhost)
	}
	if have, ok := s.Exchanges[key2(x.Vhost, x.Name)]; ok {
		return CheckExchangeEquivalent(have, *x)
	}
	return nil
}

// declareExists reports a declare whose queue or exchange exists (and,
// validated, is equivalent): applying it changes nothing.
func (s *State) declareExists(c Command) bool {
	switch c.Op {
	case OpDeclareQueue:
		_, ok := s.Queues[key2(c.Queue.Vhost, c.Queue.Name)]
		return ok
	case OpDeclareExchange:
		_, ok := s.Exchanges[key2(c.Exchange.Vhost, c.Exchange.Name)]
		return ok
	}
	return false
}

// dropBindings removes the vhost's bindings drop selects, then every
// auto-delete exchange left without a binding from it (with the bindings
// to it, repeatedly), as RabbitMQ deletes an auto-delete exchange when it
// loses its last binding. The routing table does the same on every node.
func (s *State) dropBindings(vhost string, drop func(Binding) bool) {
	for {
		touched := map[string]bool{}
		for k, b := range s.Bindings {
			if b.Vhost == vhost && drop(b) {
				delete(s.Bindings, k)
				touched[b.Source] = true
			}
		}
		gone := map[string]bool{}
		for src := range touched {
			x, ok := s.Exchanges[key2(vhost, src)]
			if ok && x.AutoDelete && !s.hasBindingFrom(vhost, src) {
				delete(s.Exchanges, key2(vhost, src))
				gone[src] = true
			}
		}
		if len(gone) == 0 {
			return
		}
		drop = func(b Binding) bool { return b.DestinationType == "exchange" && gone[b.Destination] }
	}
}

func (s *State) hasBindingFrom(vhost, src string) bool {
	for _, b := range s.Bindings {
		if b.Vhost == vhost && b.Source == src {
			return true
		}
	}
	return false
}
