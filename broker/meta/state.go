package meta

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Sentinel errors.
var (
	ErrNotFound = errors.New("meta: not found")
	ErrInvalid  = errors.New("meta: invalid")
	ErrClosed   = errors.New("meta: closed")
	// ErrUnavailable: a write that no majority of the cluster committed in
	// time (the node is cut off from the others, or they are down).
	ErrUnavailable = errors.New("meta: unavailable")
)

// Op names a command.
type Op string

// Commands.
const (
	OpPutVhost         Op = "put_vhost"
	OpDeleteVhost      Op = "delete_vhost"
	OpPutUser          Op = "put_user"
	OpDeleteUser       Op = "delete_user"
	OpPutPermission    Op = "put_permission"
	OpDeletePermission Op = "delete_permission"
	OpPutPolicy        Op = "put_policy"
	OpDeletePolicy     Op = "delete_policy"
	OpPutExchange      Op = "put_exchange"
	OpDeleteExchange   Op = "delete_exchange"
	OpPutQueue         Op = "put_queue"
	OpDeleteQueue      Op = "delete_queue"
	OpPutBinding       Op = "put_binding"
	// OpDeclareQueue and OpDeclareExchange create what is absent and
	// otherwise check the declare is equivalent (and, for an exclusive
	// queue, comes from its owner): Validate refuses it with an *Error,
	// the same on every node, so of two concurrent declares of one name
	// with different arguments one creates and the other is refused.
	OpDeclareQueue    Op = "declare_queue"
	OpDeclareExchange Op = "declare_exchange"
	OpDeleteBinding   Op = "delete_binding"
	OpPutNode         Op = "put_node"
	OpDeleteNode      Op = "delete_node"
	opSnapshot        Op = "snapshot"
)

// Command is one change to the metadata; exactly the field for Op is set.
type Command struct {
	Op         Op          `json:"op"`
	Vhost      *Vhost      `json:"vhost,omitempty"`
	User       *User       `json:"user,omitempty"`
	Permission *Permission `json:"permission,omitempty"`
	Policy     *Policy     `json:"policy,omitempty"`
	Exchange   *Exchange   `json:"exchange,omitempty"`
	Queue      *Queue      `json:"queue,omitempty"`
	Binding    *Binding    `json:"binding,omitempty"`
	Node       *Node       `json:"node,omitempty"`
	// Name and VhostName identify what a delete removes. A queue delete
	// with Queue set removes the record only while it is still that one
	// (sameQueue).
	Name      string `json:"name,omitempty"`
	VhostName string `json:"vhost_name,omitempty"`
	Snapshot  *State `json:"snapshot,omitempty"`
}

// EventKind says what changed.
type EventKind int

// Event kinds.
const (
	VhostPut EventKind = iota + 1
	VhostDeleted
	UserPut
	UserDeleted
	PermissionPut
	PermissionDeleted
	PolicyPut
	PolicyDeleted
	ExchangePut
	ExchangeDeleted
	QueuePut
	QueueDeleted
	BindingPut
	BindingDeleted
	NodePut
	NodeDeleted
	// Reset: the whole state was replaced (a replicated store installed a
	// snapshot from its leader); a subscriber drops what it derived and
	// rebuilds it from the store's reads. Cmd is empty.
	Reset
)

// Event tells subscribers about an applied command.
type Event struct {
	Kind  EventKind
	Vhost string
	Name  string
	Cmd   Command
}

// State is the whole metadata in memory. Its zero value is empty and usable
// after init.
type State struct {
	Vhosts      map[string]Vhost      `json:"vhosts"`
	Users       map[string]User       `json:"users"`
	Permissions map[string]Permission `json:"permissions"` // vhost\x00user
	Policies    map[string]Policy     `json:"policies"`    // vhost\x00name
	Exchanges   map[string]Exchange   `json:"exchanges"`   // vhost\x00name
	Queues      map[string]Queue      `json:"queues"`      // vhost\x00name
	Bindings    map[string]Binding    `json:"bindings"`    // Binding.key()
	Nodes       map[string]Node       `json:"nodes"`
}

// NewState returns an empty state.
func NewState() *State {
	s := &State{}
	s.init()
	return s
}

func (s *State) init() {
	if s.Vhosts == nil {
		s.Vhosts = map[string]Vhost{}
	}
	if s.Users == nil {
		s.Users = map[string]User{}
	}
	if s.Permissions == nil {
		s.Permissions = map[string]Permission{}
	}
	if s.Policies == nil {
		s.Policies = map[string]Policy{}
	}
	if s.Exchanges == nil {
		s.Exchanges = map[string]Exchange{}
	}
	if s.Queues == nil {
		s.Queues = map[string]Queue{}
	}
	if s.Bindings == nil {
		s.Bindings = map[string]Binding{}
	}
	if s.Nodes == nil {
		s.Nodes = map[string]Node{}
	}
}

func key2(a, b string) string { return a + "\x00" + b }

// Validate checks a command before it is logged.
func (s *State) Validate(c Command) error {
	needVhost := func(v string) error {
		if _, ok := s.Vhosts[v]; !ok {
			return fmt.Errorf("%w: vhost '%s'", ErrNotFound, v)
		}
		return nil
	}
	switch c.Op {
	case OpPutVhost:
		if c.Vhost == nil || c.Vhost.Name == "" {
			return fmt.Errorf("%w: vhost needs a name", ErrInvalid)
		}
		if v := c.Vhost.Storage.QueueVersion; v != 0 && v != 1 && v != 2 {
			return fmt.Errorf("%w: queue-version must be 1 or 2, got %d", ErrInvalid, v)
		}
		if c.Vhost.Storage.EmbedMessagesBelow < 0 || c.Vhost.Storage.StreamReadAheadLimit < 0 {
			return fmt.Errorf("%w: storage limits must not be negative", ErrInvalid)
		}
		switch c.Vhost.DefaultQueueType {
		case "", "classic", "quorum", "stream":
		default:
			return fmt.Errorf("%w: default queue type '%s'", ErrInvalid, c.Vhost.DefaultQueueType)
		}
	case OpDeleteVhost:
		return needVhost(c.Name)
	case OpPutUser:
		if c.User == nil || c.User.Name == "" {
			return fmt.Errorf("%w: user needs a name", ErrInvalid)
		}
	case OpDeleteUser:
		if _, ok := s.Users[c.Name]; !ok {
			return fmt.Errorf("%w: user '%s'", ErrNotFound, c.Name)
		}
	case OpPutPermission:
		if c.Permission == nil {
			return fmt.Errorf("%w: empty permission", ErrInvalid)
		}
		if _, ok := s.Users[c.Permission.User]; !ok {
			return fmt.Errorf("%w: user '%s'", ErrNotFound, c.Permission.User)
		}
		return needVhost(c.Permission.Vhost)
	case OpDeletePermission:
		if _, ok := s.Permissions[key2(c.VhostName, c.Name)]; !ok {
			return fmt.Errorf("%w: permission of '%s' in vhost '%s'", ErrNotFound, c.Name, c.VhostName)
		}
	case OpPutPolicy:
		if c.Policy == nil || c.Policy.Name == "" {
			return fmt.Errorf("%w: policy needs a name", ErrInvalid)
		}
		return needVhost(c.Policy.Vhost)
	case OpDeletePolicy:
		if _, ok := s.Policies[key2(c.VhostName, c.Name)]; !ok {
			return fmt.Errorf("%w: policy '%s' in vhost '%s'", ErrNotFound, c.Name, c.VhostName)
		}
	case OpPutExchange:
		if c.Exchange == nil {
			return fmt.Errorf("%w: empty exchange", ErrInvalid)
		}
		return needVhost(c.Exchange.Vhost)
	case OpPutQueue:
		if c.Queue == nil || c.Queue.Name == "" {
			return fmt.Errorf("%w: queue needs a name", ErrInvalid)
		}
		return needVhost(c.Queue.Vhost)
	case OpDeclareQueue:
		return s.validateDeclareQueue(c.Queue)
	case OpDeclareExchange:
		return s.validateDeclareExchange(c.Exchange)
	case OpPutBinding:
		if c.Binding == nil {
			return fmt.Errorf("%w: empty binding", ErrInvalid)
		}
		return needVhost(c.Binding.Vhost)
	case OpDeleteBinding:
		if c.Binding == nil {
			return fmt.Errorf("%w: empty binding", ErrInvalid)
		}
	case OpPutNode:
		if c.Node == nil || c.Node.Name == "" || c.Node.Address == "" {
			return fmt.Errorf("%w: a node needs a name and an address", ErrInvalid)
		}
	case OpDeleteNode:
		if _, ok := s.Nodes[c.Name]; !ok {
			return fmt.Errorf("%w: node '%s'", ErrNotFound, c.Name)
		}
	case opSnapshot:
		if c.Snapshot == nil {
			return fmt.Errorf("%w: empty snapshot", ErrInvalid)
		}
	case OpDeleteExchange, OpDeleteQueue:
	default:
		return fmt.Errorf("%w: unknown op %q", ErrInvalid, c.Op)
	}
	return nil
}

// Apply changes the state; it is deterministic and never fails on a
// validated command (one Validate refuses is ignored). It returns the event
// to publish (Kind 0 for none).
func (s *State) Apply(c Command) Event {
	s.init()
	if s.Validate(c) != nil && !deleteOfMissing(c) {
		return Event{}
	}
	switch c.Op {
	case OpPutVhost:
		s.Vhosts[c.Vhost.Name] = *c.Vhost
		return Event{Kind: VhostPut, Vhost: c.Vhost.Name, Name: c.Vhost.Name, Cmd: c}
	case OpDeleteVhost:
		delete(s.Vhosts, c.Name)
		for k, p := range s.Permissions {
			if p.Vhost == c.Name {
				delete(s.Permissions, k)
			}
		}
		for k, p := range s.Policies {
			if p.Vhost == c.Name {
				delete(s.Policies, k)
			}
		}
		for k, e := range s.Exchanges {
			if e.Vhost == c.Name {
				delete(s.Exchanges, k)
			}
		}
		for k, q := range s.Queues {
			if q.Vhost == c.Name {
				delete(s.Queues, k)
			}
		}
		for k, b := range s.Bindings {
			if b.Vhost == c.Name {
				delete(s.Bindings, k)
			}
		}
		return Event{Kind: VhostDeleted, Vhost: c.Name, Name: c.Name, Cmd: c}
	case OpPutUser:
		s.Users[c.User.Name] = *c.User
		return Event{Kind: UserPut, Name: c.User.Name, Cmd: c}
	case OpDeleteUser:
		delete(s.Users, c.Name)
		for k, p := range s.Permissions {
			if p.User == c.Name {
				delete(s.Permissions, k)
			}
		}
		return Event{Kind: UserDeleted, Name: c.Name, Cmd: c}
	case OpPutPermission:
		s.Permissions[key2(c.Permission.Vhost, c.Permission.User)] = *c.Permission
		return Event{Kind: PermissionPut, Vhost: c.Permission.Vhost, Name: c.Permission.User, Cmd: c}
	case OpDeletePermission:
		delete(s.Permissions, key2(c.VhostName, c.Name))
		return Event{Kind: PermissionDeleted, Vhost: c.VhostName, Name: c.Name, Cmd: c}
	case OpPutPolicy:
		s.Policies[key2(c.Policy.Vhost, c.Policy.Name)] = *c.Policy
		return Event{Kind: PolicyPut, Vhost: c.Policy.Vhost, Name: c.Policy.Name, Cmd: c}
	case OpDeletePolicy:
		delete(s.Policies, key2(c.VhostName, c.Name))
		return Event{Kind: PolicyDeleted, Vhost: c.VhostName, Name: c.Name, Cmd: c}
	case OpPutExchange:
		s.Exchanges[key2(c.Exchange.Vhost, c.Exchange.Name)] = *c.Exchange
		return Event{Kind: ExchangePut, Vhost: c.Exchange.Vhost, Name: c.Exchange.Name, Cmd: c}
	case OpDeclareExchange:
		if s.declareExists(c) {
			return Event{}
		}
		s.Exchanges[key2(c.Exchange.Vhost, c.Exchange.Name)] = *c.Exchange
		return Event{Kind: ExchangePut, Vhost: c.Exchange.Vhost, Name: c.Exchange.Name, Cmd: c}
	case OpDeleteExchange:
		delete(s.Exchanges, key2(c.VhostName, c.Name))
		s.dropBindings(c.VhostName, func(b Binding) bool {
			return b.Source == c.Name || (b.DestinationType == "exchange" && b.Destination == c.Name)
		})
		return Event{Kind: ExchangeDeleted, Vhost: c.VhostName, Name: c.Name, Cmd: c}
	case OpPutQueue:
		s.Queues[key2(c.Queue.Vhost, c.Queue.Name)] = *c.Queue
		return Event{Kind: QueuePut, Vhost: c.Queue.Vhost, Name: c.Queue.Name, Cmd: c}
	case OpDeclareQueue:
		if s.declareExists(c) {
			return Event{}
		}
		q := *c.Queue
		if !q.Exclusive {
			q.Owner = nil // the declaring connection matters only to an exclusive queue
		}
		s.Queues[key2(q.Vhost, q.Name)] = q
		c.Queue = &q
		return Event{Kind: QueuePut, Vhost: q.Vhost, Name: q.Name, Cmd: c}
	case OpDeleteQueue:
		k := key2(c.VhostName, c.Name)
		if cur, ok := s.Queues[k]; c.Queue != nil && (!ok || !sameQueue(cur, *c.Queue)) {
			return Event{}
		}
		delete(s.Queues, k)
		s.dropBindings(c.VhostName, func(b Binding) bool { return b.DestinationType == "queue" && b.Destination == c.Name })
		return Event{Kind: QueueDeleted, Vhost: c.VhostName, Name: c.Name, Cmd: c}
	case OpPutBinding:
		s.Bindings[c.Binding.key()] = *c.Binding
		return Event{Kind: BindingPut, Vhost: c.Binding.Vhost, Cmd: c}
	case OpDeleteBinding:
		k := c.Binding.key()
		s.dropBindings(c.Binding.Vhost, func(b Binding) bool { return b.key() == k })
		return Event{Kind: BindingDeleted, Vhost: c.Binding.Vhost, Cmd: c}
	case OpPutNode:
		s.Nodes[c.Node.Name] = *c.Node
		return Event{Kind: NodePut, Name: c.Node.Name, Cmd: c}
	case OpDeleteNode:
		delete(s.Nodes, c.Name)
		return Event{Kind: NodeDeleted, Name: c.Name, Cmd: c}
	case opSnapshot:
		*s = *c.Snapshot
		s.init()
	}
	return Event{}
}

func sortedValues[T any](m map[string]T, keep func(T) bool) []T {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if keep == nil || keep(v) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

// normalize makes decoded JSON numbers in arguments and policy definitions
// integers when they are whole (AMQP tables carry integers; JSON has only
// floats), so a value survives a restart with an integer type.
func (c *Command) normalize() {
	switch {
	case c.Exchange != nil:
		normalizeMap(c.Exchange.Arguments)
	case c.Queue != nil:
		normalizeMap(c.Queue.Arguments)
	case c.Binding != nil:
		normalizeMap(c.Binding.Arguments)
	case c.Policy != nil:
		normalizeMap(c.Policy.Definition)
	case c.Snapshot != nil:
		c.Snapshot.normalize()
	}
}

func (s *State) normalize() {
	for _, e := range s.Exchanges {
		normalizeMap(e.Arguments)
	}
	for _, q := range s.Queues {
		normalizeMap(q.Arguments)
	}
	for _, b := range s.Bindings {
		normalizeMap(b.Arguments)
	}
	for _, p := range s.Policies {
		normalizeMap(p.Definition)
	}
}

func normalizeMap(m map[string]any) {
	for k, v := range m {
		m[k] = normalizeValue(v)
	}
}

func normalizeValue(v any) any {
	switch t := v.(type) {
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t)
		}
	case map[string]any:
		normalizeMap(t)
	case []any:
		for i := range t {
			t[i] = normalizeValue(t[i])
		}
	}
	return v
}

// deleteOfMissing reports a delete Validate refuses only because its target
// is gone: applying it is a harmless no-op, and it keeps replay idempotent.
func deleteOfMissing(c Command) bool {
	switch c.Op {
	case OpDeleteVhost, OpDeleteUser, OpDeletePermission, OpDeletePolicy, OpDeleteNode:
		return true
	}
	return false
}

// sameQueue reports whether a and b are one queue's record: what a
// declare under the same name elsewhere would change (its arguments are
// compared by the declare itself).
func sameQueue(a, b Queue) bool {
	if a.Type != b.Type || a.Node != b.Node || a.Durable != b.Durable || a.AutoDelete != b.AutoDelete || a.Exclusive != b.Exclusive {
		return false
	}
	if a.Owner == nil || b.Owner == nil {
		return a.Owner == nil && b.Owner == nil
	}
	return *a.Owner == *b.Owner
}
