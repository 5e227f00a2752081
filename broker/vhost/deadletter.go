package vhost

import (
	"sync/atomic"

	"github.com/warrenmq/warren/broker/queue"
)

// dropConfirmer is the confirmer of the dead letters this vhost sends to
// one queue of another node. A dead letter that node does not take (it is
// down or unreachable, or no longer has the queue) is dropped, as RabbitMQ
// drops a classic queue's dead letters it cannot deliver (at most once):
// it is counted (DeadLettersDropped, warren_dead_letters_dropped_total)
// and the first one logged, once per queue and node.
type dropConfirmer struct {
	v      *Vhost
	queue  string
	node   string
	logged atomic.Bool
}

func (d *dropConfirmer) Confirm(tags []uint64, ok bool) {
	if ok {
		return
	}
	d.v.dlDropped.Add(uint64(len(tags)))
	if d.logged.CompareAndSwap(false, true) {
		d.v.log.Warn("dead-letter: dropped: the node of the queue it was routed to did not take it (down or unreachable); later drops to this queue are counted (warren_dead_letters_dropped_total), not logged",
			"queue", d.queue, "node", d.node, "messages", len(tags))
	}
}

// remoteDropConfirmer is the dropConfirmer for dead letters to q when q is
// the proxy of a queue of another node; nil for a queue held here.
func (v *Vhost) remoteDropConfirmer(q queue.Queue) queue.Confirmer {
	name := q.Info().Name
	v.mu.RLock()
	e, ok := v.queues[name]
	var node string
	if ok && e.proxy == q {
		node = e.rec.Node
	}
	v.mu.RUnlock()
	if node == "" {
		return nil
	}
	key := name + "\x00" + node
	if c, ok := v.dlConfirmers.Load(key); ok {
		return c.(*dropConfirmer)
	}
	c, _ := v.dlConfirmers.LoadOrStore(key, &dropConfirmer{v: v, queue: name, node: node})
	return c.(*dropConfirmer)
}

// DeadLettersDropped counts the dead letters dropped because the node of
// the queue they were routed to did not take them.
func (v *Vhost) DeadLettersDropped() uint64 { return v.dlDropped.Load() }
