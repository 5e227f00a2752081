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
			if (q.Node == "" || q.Node == node) && Transient(q) {
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

// Transient reports whether a queue does not outlive a restart of its
// node: a non-durable or an exclusive one. Its record is deleted when the
// node starts again (DropTransient), and by the cluster's metadata leader
// once the node has been down for a while, as RabbitMQ's on_node_down
// deletes a down node's transient queues.
func Transient(q meta.Queue) bool {
	return !q.Durable || q.Exclusive
}
