package meta

import "context"

// Store is the broker's metadata. Safe for concurrent use: reads come from
// this node's memory; a write returns once it is durable (and, for a
// replicated store, committed) and applied on the node it was called on,
// and that node's subscribers have seen its event, so a caller finds the
// change applied to the node's runtime (broker/vhost) when the call
// returns, whichever node leads. Deleting a vhost removes everything in it.
type Store interface {
	PutVhost(ctx context.Context, v Vhost) error
	DeleteVhost(ctx context.Context, name string) error
	Vhost(name string) (Vhost, bool)
	Vhosts() []Vhost

	PutUser(ctx context.Context, u User) error
	DeleteUser(ctx context.Context, name string) error
	User(name string) (User, bool)
	Users() []User

	PutPermission(ctx context.Context, p Permission) error
	DeletePermission(ctx context.Context, vhost, user string) error
	Permission(vhost, user string) (Permission, bool)
	Permissions() []Permission

	PutPolicy(ctx context.Context, p Policy) error
	DeletePolicy(ctx context.Context, vhost, name string) error
	Policies(vhost string) []Policy

	PutExchange(ctx context.Context, e Exchange) error
	// DeclareExchange creates e unless its name exists; an existing one
	// must be equivalent (else an *Error of Kind ErrInequivalent). created
	// says whether this call made it.
	DeclareExchange(ctx context.Context, e Exchange) (created bool, err error)
	DeleteExchange(ctx context.Context, vhost, name string) error
	Exchanges(vhost string) []Exchange

	PutQueue(ctx context.Context, q Queue) error
	// DeclareQueue creates q unless its name exists; an existing one must
	// be equivalent and, when exclusive, owned by q.Owner (else an *Error
	// of Kind ErrInequivalent or ErrLocked), decided by the state machine
	// so concurrent declares of one name on any nodes agree. created says
	// whether this call made it.
	DeclareQueue(ctx context.Context, q Queue) (created bool, err error)
	DeleteQueue(ctx context.Context, vhost, name string) error
	// DeleteQueueIf deletes q's record only while it still is q (same
	// type, node, durability, exclusivity and owner), so a delete decided
	// from a list read earlier never removes a queue declared again since
	// under the same name. deleted says whether it did.
	DeleteQueueIf(ctx context.Context, q Queue) (deleted bool, err error)
	Queues(vhost string) []Queue

	PutBinding(ctx context.Context, b Binding) error
	DeleteBinding(ctx context.Context, b Binding) error
	Bindings(vhost string) []Binding

	// PutNode records a cluster member and the address its peers dial;
	// DeleteNode forgets it. Node names are the members' Raft server ids.
	PutNode(ctx context.Context, n Node) error
	DeleteNode(ctx context.Context, name string) error
	Nodes() []Node

	// Subscribe registers fn for every applied command, called in log
	// order after the change is durable (on every node, for a replicated
	// store), and for a Reset when the whole state was replaced; fn may
	// read the store, must not write to it nor block long. cancel removes it.
	Subscribe(fn func(Event)) (cancel func())
	Close() error
}
