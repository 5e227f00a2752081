package meta

import "context"

// Store is the broker's metadata. Safe for concurrent use: reads come from
// memory; a write returns once it is durable (and, for a replicated store,
// committed). Deleting a vhost removes everything in it.
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
	DeleteExchange(ctx context.Context, vhost, name string) error
	Exchanges(vhost string) []Exchange

	PutQueue(ctx context.Context, q Queue) error
	DeleteQueue(ctx context.Context, vhost, name string) error
	Queues(vhost string) []Queue

	PutBinding(ctx context.Context, b Binding) error
	DeleteBinding(ctx context.Context, b Binding) error
	Bindings(vhost string) []Binding

	// PutNode records a cluster member and the address its peers dial;
	// DeleteNode forgets it. Node names are the members' Raft server ids.
	PutNode(ctx context.Context, n Node) error
	DeleteNode(ctx context.Context, name string) error
	Nodes() []Node

	// Subscribe registers fn for every applied command, called in order
	// after the change is durable; fn must not block long. cancel removes it.
	Subscribe(fn func(Event)) (cancel func())
	Close() error
}
