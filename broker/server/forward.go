package server

import (
	"context"

	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/vhost"
)

// forwardLocal is this node's side of forwarded queue operations: the
// queues its vhosts hold.
type forwardLocal struct{ b *Broker }

func (l forwardLocal) vhost(name string) (*vhost.Vhost, error) {
	v, ok := l.b.Vhost(name)
	if !ok {
		return nil, &vhost.Error{Kind: vhost.ErrNotFound, Text: "no vhost '" + name + "'"}
	}
	return v, nil
}

func (l forwardLocal) LocalQueue(vh, name string) (queue.Queue, error) {
	v, err := l.vhost(vh)
	if err != nil {
		return nil, err
	}
	return v.LocalQueue(name)
}

// LocalQueueNow is LocalQueue that never waits: not ready while the
// broker's vhosts are being changed (a vhost's start holds b.mu across its
// recovery) or the queue's open is under way.
func (l forwardLocal) LocalQueueNow(vh, name string) (queue.Queue, bool, error) {
	if !l.b.mu.TryRLock() {
		return nil, false, nil
	}
	v, ok := l.b.vhosts[vh]
	l.b.mu.RUnlock()
	if !ok {
		return nil, true, &vhost.Error{Kind: vhost.ErrNotFound, Text: "no vhost '" + vh + "'"}
	}
	return v.LocalQueueIfOpen(name)
}

// LocalQueueWait is LocalQueue waiting for an open under way until ctx
// ends.
func (l forwardLocal) LocalQueueWait(ctx context.Context, vh, name string) (queue.Queue, error) {
	v, err := l.vhost(vh)
	if err != nil {
		return nil, err
	}
	return v.LocalQueueContext(ctx, name)
}

func (l forwardLocal) DeleteQueue(ctx context.Context, vh, name string, ifUnused, ifEmpty bool) (int, error) {
	v, err := l.vhost(vh)
	if err != nil {
		return 0, err
	}
	// A queue still opening is waited for no longer than the call.
	if _, err := v.LocalQueueContext(ctx, name); err != nil {
		return 0, err
	}
	// The caller checked the exclusive owner.
	return v.DeleteQueue(ctx, name, vhost.QueueDeleteOptions{IfUnused: ifUnused, IfEmpty: ifEmpty, Force: true})
}

func (l forwardLocal) NewMessageID() uint64 { return l.b.NewMessageID() }
