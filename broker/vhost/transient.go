package vhost

import (
	"context"
	"errors"
	"fmt"

	"github.com/warrenmq/warren/broker/meta"
)

// DropTransient deletes from the metadata what did not outlive node's
// restart, as RabbitMQ does when a node starts: the non-durable and the
// exclusive queues the metadata places on node (left by a crash or a
// kill; a clean stop deleted them already), with their bindings, and, when
// exchanges is set (the whole cluster restarts: one node today), every
// non-durable exchange. Call it before the node's vhosts open.
func DropTransient(ctx context.Context, m meta.Store, node string, exchanges bool) error {
	var errs []error
	for _, mv := range m.Vhosts() {
		for _, q := range m.Queues(mv.Name) {
			if (q.Node == "" || q.Node == node) && (!q.Durable || q.Exclusive) {
				if err := m.DeleteQueue(ctx, mv.Name, q.Name); err != nil {
					errs = append(errs, fmt.Errorf("drop transient queue '%s' in vhost '%s': %w", q.Name, mv.Name, err))
				}
			}
		}
		if !exchanges {
			continue
		}
		for _, x := range m.Exchanges(mv.Name) {
			if !x.Durable {
				if err := m.DeleteExchange(ctx, mv.Name, x.Name); err != nil {
					errs = append(errs, fmt.Errorf("drop transient exchange '%s' in vhost '%s': %w", x.Name, mv.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// AdoptOrphans places on node the queues the metadata places on a node
// that is not a cluster member, when node is alone: a single node whose
// cluster.node_name changed (the default is warren@<hostname>) keeps its
// queues, whose files are in its data directory. In a cluster (another
// member listed) it changes nothing: a queue of a forgotten node is not
// this node's to take. Call it before the node's vhosts open.
func AdoptOrphans(ctx context.Context, m meta.Store, node string) error {
	members := map[string]bool{}
	for _, n := range m.Nodes() {
		if n.Name != node {
			return nil
		}
		members[n.Name] = true
	}
	var errs []error
	for _, mv := range m.Vhosts() {
		for _, q := range m.Queues(mv.Name) {
			if q.Node == "" || q.Node == node || members[q.Node] {
				continue
			}
			q.Node = node
			if err := m.PutQueue(ctx, q); err != nil {
				errs = append(errs, fmt.Errorf("adopt queue '%s' in vhost '%s': %w", q.Name, mv.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
