package meta

import "context"

// The Store methods of Raft: writes through apply, reads from this node's
// copy of the state.

// PutVhost implements Store.
func (r *Raft) PutVhost(ctx context.Context, v Vhost) error {
	return r.apply(ctx, Command{Op: OpPutVhost, Vhost: &v})
}

// DeleteVhost implements Store.
func (r *Raft) DeleteVhost(ctx context.Context, name string) error {
	return r.apply(ctx, Command{Op: OpDeleteVhost, Name: name})
}

// Vhost implements Store.
func (r *Raft) Vhost(name string) (Vhost, bool) {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	v, ok := r.fsm.state.Vhosts[name]
	return v, ok
}

// Vhosts implements Store.
func (r *Raft) Vhosts() []Vhost {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	return sortedValues(r.fsm.state.Vhosts, nil)
}

// PutUser implements Store.
func (r *Raft) PutUser(ctx context.Context, u User) error {
	return r.apply(ctx, Command{Op: OpPutUser, User: &u})
}

// DeleteUser implements Store.
func (r *Raft) DeleteUser(ctx context.Context, name string) error {
	return r.apply(ctx, Command{Op: OpDeleteUser, Name: name})
}

// User implements Store.
func (r *Raft) User(name string) (User, bool) {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	u, ok := r.fsm.state.Users[name]
	return u, ok
}

// Users implements Store.
func (r *Raft) Users() []User {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	return sortedValues(r.fsm.state.Users, nil)
}

// PutPermission implements Store.
func (r *Raft) PutPermission(ctx context.Context, p Permission) error {
	return r.apply(ctx, Command{Op: OpPutPermission, Permission: &p})
}

// DeletePermission implements Store.
func (r *Raft) DeletePermission(ctx context.Context, vhost, user string) error {
	return r.apply(ctx, Command{Op: OpDeletePermission, VhostName: vhost, Name: user})
}

// Permission implements Store.
func (r *Raft) Permission(vhost, user string) (Permission, bool) {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	p, ok := r.fsm.state.Permissions[key2(vhost, user)]
	return p, ok
}

// Permissions implements Store.
func (r *Raft) Permissions() []Permission {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	return sortedValues(r.fsm.state.Permissions, nil)
}

// PutPolicy implements Store.
func (r *Raft) PutPolicy(ctx context.Context, p Policy) error {
	return r.apply(ctx, Command{Op: OpPutPolicy, Policy: &p})
}

// DeletePolicy implements Store.
func (r *Raft) DeletePolicy(ctx context.Context, vhost, name string) error {
	return r.apply(ctx, Command{Op: OpDeletePolicy, VhostName: vhost, Name: name})
}

// Policies implements Store; vhost "" lists every vhost's.
func (r *Raft) Policies(vhost string) []Policy {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	return sortedValues(r.fsm.state.Policies, func(p Policy) bool { return vhost == "" || p.Vhost == vhost })
}

// PutExchange implements Store.
func (r *Raft) PutExchange(ctx context.Context, e Exchange) error {
	return r.apply(ctx, Command{Op: OpPutExchange, Exchange: &e})
}

// DeclareExchange implements Store.
func (r *Raft) DeclareExchange(ctx context.Context, e Exchange) (bool, error) {
	return r.applyChanged(ctx, Command{Op: OpDeclareExchange, Exchange: &e})
}

// DeleteExchange implements Store.
func (r *Raft) DeleteExchange(ctx context.Context, vhost, name string) error {
	return r.apply(ctx, Command{Op: OpDeleteExchange, VhostName: vhost, Name: name})
}

// Exchanges implements Store; vhost "" lists every vhost's.
func (r *Raft) Exchanges(vhost string) []Exchange {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	return sortedValues(r.fsm.state.Exchanges, func(e Exchange) bool { return vhost == "" || e.Vhost == vhost })
}

// PutQueue implements Store.
func (r *Raft) PutQueue(ctx context.Context, q Queue) error {
	return r.apply(ctx, Command{Op: OpPutQueue, Queue: &q})
}

// DeclareQueue implements Store.
func (r *Raft) DeclareQueue(ctx context.Context, q Queue) (bool, error) {
	return r.applyChanged(ctx, Command{Op: OpDeclareQueue, Queue: &q})
}

// DeleteQueue implements Store.
func (r *Raft) DeleteQueue(ctx context.Context, vhost, name string) error {
	return r.apply(ctx, Command{Op: OpDeleteQueue, VhostName: vhost, Name: name})
}

// DeleteQueueIf implements Store.
func (r *Raft) DeleteQueueIf(ctx context.Context, q Queue) (bool, error) {
	return r.applyChanged(ctx, Command{Op: OpDeleteQueue, VhostName: q.Vhost, Name: q.Name, Queue: &q})
}

// Queues implements Store; vhost "" lists every vhost's.
func (r *Raft) Queues(vhost string) []Queue {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	return sortedValues(r.fsm.state.Queues, func(q Queue) bool { return vhost == "" || q.Vhost == vhost })
}

// PutBinding implements Store.
func (r *Raft) PutBinding(ctx context.Context, b Binding) error {
	return r.apply(ctx, Command{Op: OpPutBinding, Binding: &b})
}

// DeleteBinding implements Store.
func (r *Raft) DeleteBinding(ctx context.Context, b Binding) error {
	return r.apply(ctx, Command{Op: OpDeleteBinding, Binding: &b})
}

// Bindings implements Store; vhost "" lists every vhost's.
func (r *Raft) Bindings(vhost string) []Binding {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	return sortedValues(r.fsm.state.Bindings, func(b Binding) bool { return vhost == "" || b.Vhost == vhost })
}

// PutNode implements Store.
func (r *Raft) PutNode(ctx context.Context, n Node) error {
	return r.apply(ctx, Command{Op: OpPutNode, Node: &n})
}

// DeleteNode implements Store.
func (r *Raft) DeleteNode(ctx context.Context, name string) error {
	return r.apply(ctx, Command{Op: OpDeleteNode, Name: name})
}

// Nodes implements Store.
func (r *Raft) Nodes() []Node {
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	return sortedValues(r.fsm.state.Nodes, nil)
}
