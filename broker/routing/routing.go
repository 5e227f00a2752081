package routing

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Sentinel errors.
var (
	ErrNotFound     = errors.New("routing: not found")
	ErrInUse        = errors.New("routing: exchange in use")
	ErrInequivalent = errors.New("routing: inequivalent exchange")
	ErrUnknownKind  = errors.New("routing: unknown exchange type")
)

// Kind is an exchange type.
type Kind uint8

// Exchange types.
const (
	Direct Kind = iota + 1
	Fanout
	Topic
	Headers
)

// ParseKind maps an exchange type name to its Kind.
func ParseKind(s string) (Kind, error) {
	switch s {
	case "direct":
		return Direct, nil
	case "fanout":
		return Fanout, nil
	case "topic":
		return Topic, nil
	case "headers":
		return Headers, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownKind, s)
}

func (k Kind) String() string {
	switch k {
	case Direct:
		return "direct"
	case Fanout:
		return "fanout"
	case Topic:
		return "topic"
	case Headers:
		return "headers"
	}
	return "unknown"
}

// Exchange is an exchange's declaration.
type Exchange struct {
	Name              string
	Kind              Kind
	Durable           bool
	AutoDelete        bool
	Internal          bool
	Args              map[string]any
	AlternateExchange string
}

// Binding links a source exchange to a queue or, with ToExchange, to another exchange.
type Binding struct {
	Source      string
	Destination string
	ToExchange  bool
	Key         string
	Args        map[string]any
}

func (b Binding) same(o Binding) bool {
	return b.Source == o.Source && b.Destination == o.Destination && b.ToExchange == o.ToExchange && b.Key == o.Key && argsEqual(b.Args, o.Args)
}

// argsEqual compares argument tables as RabbitMQ's equivalence check does,
// by value: an integer is equal whatever its width (an argument read back
// from the metadata store is an int64, a client sends an int32), and []byte
// equals the same string.
func argsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !argValueEqual(av, bv) {
			return false
		}
	}
	return true
}

func argValueEqual(a, b any) bool {
	switch at := a.(type) {
	case map[string]any:
		bt, ok := b.(map[string]any)
		return ok && argsEqual(at, bt)
	case []any:
		bt, ok := b.([]any)
		if !ok || len(at) != len(bt) {
			return false
		}
		for i := range at {
			if !argValueEqual(at[i], bt[i]) {
				return false
			}
		}
		return true
	case []byte:
		if bs, ok := b.(string); ok {
			return string(at) == bs
		}
	}
	return valuesEqual(a, b)
}

// Table is one vhost's exchanges and bindings. Safe for concurrent use.
type Table struct {
	mu     sync.Mutex // serializes writers
	snap   atomic.Pointer[snapshot]
	queues sync.Map // queue name -> struct{}: targets of the default exchange
}

// snapshot is immutable once published.
type snapshot struct {
	exchanges map[string]*exchangeState
}

// exchangeState is an exchange with its outgoing bindings.
type exchangeState struct {
	x        Exchange
	bindings []Binding
	direct   map[string][]dest // direct: key -> destinations
	topic    *topicNode
	fanout   []dest
	headers  []headersBinding
}

type dest struct {
	name       string
	toExchange bool
}

// NewTable returns a table with the default and amq.* exchanges.
func NewTable() *Table {
	s := &snapshot{exchanges: map[string]*exchangeState{}}
	for _, x := range []Exchange{
		{Name: "", Kind: Direct, Durable: true},
		{Name: "amq.direct", Kind: Direct, Durable: true},
		{Name: "amq.fanout", Kind: Fanout, Durable: true},
		{Name: "amq.topic", Kind: Topic, Durable: true},
		{Name: "amq.headers", Kind: Headers, Durable: true},
		{Name: "amq.match", Kind: Headers, Durable: true},
	} {
		s.exchanges[x.Name] = buildExchange(x, nil)
	}
	t := &Table{}
	t.snap.Store(s)
	return t
}

func buildExchange(x Exchange, bs []Binding) *exchangeState {
	e := &exchangeState{x: x, bindings: bs}
	switch x.Kind {
	case Direct:
		e.direct = map[string][]dest{}
		for _, b := range bs {
			e.direct[b.Key] = append(e.direct[b.Key], dest{b.Destination, b.ToExchange})
		}
	case Fanout:
		for _, b := range bs {
			e.fanout = append(e.fanout, dest{b.Destination, b.ToExchange})
		}
	case Topic:
		e.topic = &topicNode{}
		var buf [maxStackWords]string
		for _, b := range bs {
			e.topic.insert(splitKey(b.Key, buf[:0]), dest{b.Destination, b.ToExchange})
		}
	case Headers:
		for _, b := range bs {
			e.headers = append(e.headers, newHeadersBinding(b))
		}
	}
	return e
}

// clone copies the snapshot's maps (exchange states are shared until replaced).
func (s *snapshot) clone() *snapshot {
	n := &snapshot{exchanges: make(map[string]*exchangeState, len(s.exchanges))}
	for k, v := range s.exchanges {
		n.exchanges[k] = v
	}
	return n
}

// DeclareExchange adds an exchange, or returns the existing one when it is
// equivalent; an existing one that differs gives ErrInequivalent.
func (t *Table) DeclareExchange(x Exchange) (Exchange, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.snap.Load()
	if e, ok := cur.exchanges[x.Name]; ok {
		ex := e.x
		if ex.Kind != x.Kind || ex.Durable != x.Durable || ex.AutoDelete != x.AutoDelete || ex.Internal != x.Internal || !argsEqual(ex.Args, x.Args) {
			return ex, false, fmt.Errorf("%w: %q", ErrInequivalent, x.Name)
		}
		return ex, false, nil
	}
	if x.Kind < Direct || x.Kind > Headers {
		return Exchange{}, false, ErrUnknownKind
	}
	n := cur.clone()
	n.exchanges[x.Name] = buildExchange(x, nil)
	t.snap.Store(n)
	return x, true, nil
}

// Exchange returns a declared exchange.
func (t *Table) Exchange(name string) (Exchange, bool) {
	e, ok := t.snap.Load().exchanges[name]
	if !ok {
		return Exchange{}, false
	}
	return e.x, true
}

// HasBindingsFrom reports whether the exchange is the source of a binding.
func (t *Table) HasBindingsFrom(name string) bool {
	e, ok := t.snap.Load().exchanges[name]
	return ok && len(e.bindings) > 0
}

// Exchanges lists every exchange, sorted by name.
func (t *Table) Exchanges() []Exchange {
	s := t.snap.Load()
	out := make([]Exchange, 0, len(s.exchanges))
	for _, e := range s.exchanges {
		out = append(out, e.x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DeleteExchange removes an exchange and every binding from or to it.
// ifUnused refuses (ErrInUse) when it is the source of any binding.
func (t *Table) DeleteExchange(name string, ifUnused bool) error {
	_, _, err := t.DeleteExchangeCascade(name, ifUnused)
	return err
}

// DeleteExchangeCascade is DeleteExchange that also reports the bindings it
// removed and the auto-delete exchanges that lost their last binding to it
// (and were deleted too).
func (t *Table) DeleteExchangeCascade(name string, ifUnused bool) (removed []Binding, autoDeleted []string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.snap.Load()
	e, ok := cur.exchanges[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: exchange %q", ErrNotFound, name)
	}
	if ifUnused && len(e.bindings) > 0 {
		return nil, nil, fmt.Errorf("%w: %q", ErrInUse, name)
	}
	n := cur.clone()
	delete(n.exchanges, name)
	removed = append(removed, e.bindings...)
	removed, autoDeleted = n.dropBindings(removed, func(b Binding) bool { return b.ToExchange && b.Destination == name })
	t.snap.Store(n)
	return removed, autoDeleted, nil
}

// dropBindings removes the bindings drop selects from every exchange of n
// (a private copy), appending them to removed. Auto-delete sources left
// without bindings are deleted, with the bindings to them, repeatedly; their
// names are returned sorted.
func (n *snapshot) dropBindings(removed []Binding, drop func(Binding) bool) ([]Binding, []string) {
	var autoDeleted []string
	for {
		var gone []string
		for src, se := range n.exchanges {
			kept, changed := without(se.bindings, func(b Binding) bool {
				if drop(b) {
					removed = append(removed, b)
					return true
				}
				return false
			})
			if !changed {
				continue
			}
			if len(kept) == 0 && se.x.AutoDelete {
				delete(n.exchanges, src)
				gone = append(gone, src)
				continue
			}
			n.exchanges[src] = buildExchange(se.x, kept)
		}
		if len(gone) == 0 {
			break
		}
		autoDeleted = append(autoDeleted, gone...)
		drop = func(b Binding) bool {
			if !b.ToExchange {
				return false
			}
			for _, g := range gone {
				if b.Destination == g {
					return true
				}
			}
			return false
		}
	}
	sort.Strings(autoDeleted)
	return removed, autoDeleted
}

func without(bs []Binding, drop func(Binding) bool) ([]Binding, bool) {
	var kept []Binding
	changed := false
	for _, b := range bs {
		if drop(b) {
			changed = true
			continue
		}
		kept = append(kept, b)
	}
	return kept, changed
}

// Bind adds a binding (idempotent). The source must exist; for an exchange
// destination, so must it. A queue destination is not checked: the caller
// binds only queues it has (and RemoveQueue drops their bindings).
func (t *Table) Bind(b Binding) error {
	return t.BindAll([]Binding{b})
}

// BindAll adds many bindings and publishes one snapshot: use it to restore
// thousands of bindings at start (Bind one at a time rebuilds the source's
// routing structure each time). Bindings whose source (or destination
// exchange) is missing are skipped and reported in the joined error; the
// others are added.
func (t *Table) BindAll(bs []Binding) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.snap.Load()
	var errs []error
	added := map[string][]Binding{}
	for _, b := range bs {
		src, ok := cur.exchanges[b.Source]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: exchange %q", ErrNotFound, b.Source))
			continue
		}
		if b.ToExchange {
			if _, ok := cur.exchanges[b.Destination]; !ok {
				errs = append(errs, fmt.Errorf("%w: exchange %q", ErrNotFound, b.Destination))
				continue
			}
		}
		have, ok := added[b.Source]
		if !ok {
			have = append([]Binding(nil), src.bindings...)
		}
		if containsBinding(have, b) {
			continue
		}
		added[b.Source] = append(have, b)
	}
	if len(added) > 0 {
		n := cur.clone()
		for name, nbs := range added {
			n.exchanges[name] = buildExchange(cur.exchanges[name].x, nbs)
		}
		t.snap.Store(n)
	}
	return errors.Join(errs...)
}

func containsBinding(bs []Binding, b Binding) bool {
	for _, have := range bs {
		if have.same(b) {
			return true
		}
	}
	return false
}

// Unbind removes a binding (an absent one is no error); ErrNotFound when the
// source exchange is missing. An auto-delete source that loses its last
// binding is deleted.
func (t *Table) Unbind(b Binding) error {
	_, err := t.UnbindAutoDelete(b)
	return err
}

// UnbindAutoDelete is Unbind that reports the auto-delete exchanges it
// deleted (the source, when that was its last binding).
func (t *Table) UnbindAutoDelete(b Binding) (autoDeleted []string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.snap.Load()
	if _, ok := cur.exchanges[b.Source]; !ok {
		return nil, fmt.Errorf("%w: exchange %q", ErrNotFound, b.Source)
	}
	n := cur.clone()
	removed, autoDeleted := n.dropBindings(nil, func(have Binding) bool { return have.same(b) })
	if len(removed) == 0 {
		return nil, nil
	}
	t.snap.Store(n)
	return autoDeleted, nil
}

// Bindings lists every binding (the default exchange's implicit ones
// excluded), sorted by source, destination and key.
func (t *Table) Bindings() []Binding {
	s := t.snap.Load()
	var out []Binding
	for _, e := range s.exchanges {
		out = append(out, e.bindings...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		if out[i].Destination != out[j].Destination {
			return out[i].Destination < out[j].Destination
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// AddQueue makes a queue reachable through the default exchange.
func (t *Table) AddQueue(name string) {
	t.queues.Store(name, struct{}{})
}

// RemoveQueue forgets a queue and drops every binding to it. It returns the
// removed bindings and the auto-delete exchanges that lost their last binding
// (and were deleted).
func (t *Table) RemoveQueue(name string) (removed []Binding, autoDeleted []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queues.Delete(name)
	n := t.snap.Load().clone()
	removed, autoDeleted = n.dropBindings(nil, func(b Binding) bool { return !b.ToExchange && b.Destination == name })
	if len(removed) > 0 {
		t.snap.Store(n)
	}
	return removed, autoDeleted
}
