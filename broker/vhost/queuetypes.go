package vhost

import (
	"context"
	"errors"

	"github.com/warrenmq/warren/broker/queue"
)

// QueueType is what a vhost needs of one queue type (an x-queue-type
// value): a check of a declare before it is recorded, and how this node
// opens a queue of the type that the metadata places on it. Quorum queues
// and replicated streams drop in as entries of QueueTypes.
type QueueType struct {
	// Check refuses a declare's arguments before the queue is recorded
	// (nil accepts); its error is returned to the client as is.
	Check func(args queue.Args) error
	// Open opens (creates, or recovers from its files) a queue this node
	// holds.
	Open func(ctx context.Context, v *Vhost, info queue.Info, args queue.Args) (queue.Queue, error)
}

// QueueTypes maps x-queue-type values to their QueueType. A vhost only
// reads it.
type QueueTypes map[string]QueueType

// DefaultQueueTypes is classic and stream, opened on this node; quorum is
// refused, as every type this node does not have.
func DefaultQueueTypes() QueueTypes {
	return QueueTypes{
		"classic": {Open: openClassic},
		"stream":  {Open: openStream},
		"quorum":  {Check: func(queue.Args) error { return unsupportedType("quorum") }},
	}
}

func unsupportedType(name string) error {
	return errorf(ErrPrecondition, "queue type '%s' is not supported by this node yet", name)
}

// lookup returns the type that opens name, refusing a type without an opener.
func (ts QueueTypes) lookup(name string) (QueueType, error) {
	qt, ok := ts[name]
	if !ok {
		return QueueType{}, unsupportedType(name)
	}
	if qt.Check == nil && qt.Open == nil {
		return QueueType{}, unsupportedType(name)
	}
	return qt, nil
}

// check runs a type's declare check: an unknown type, or one without an
// opener, is refused.
func (ts QueueTypes) check(name string, args queue.Args) error {
	qt, err := ts.lookup(name)
	if err != nil {
		return err
	}
	if qt.Check != nil {
		if err := qt.Check(args); err != nil {
			return err
		}
	}
	if qt.Open == nil {
		return unsupportedType(name)
	}
	return nil
}

func openClassic(ctx context.Context, v *Vhost, info queue.Info, args queue.Args) (queue.Queue, error) {
	opts := v.storeOptions(args)
	if args.QueueVersion == 0 {
		if ver := v.policyQueueVersion(info.Name); ver != 0 {
			opts.Version = ver
		}
	}
	return queue.OpenClassic(ctx, queue.ClassicConfig{
		Info:           info,
		Args:           args,
		Store:          v.store,
		StoreOptions:   opts,
		MemoryMessages: v.cfg.Defaults.QueueMemoryMessages,
		Host:           host{v},
		Log:            v.log,
	})
}

func openStream(ctx context.Context, v *Vhost, info queue.Info, args queue.Args) (queue.Queue, error) {
	q, err := queue.OpenStream(ctx, queue.StreamConfig{Info: info, Args: args, Dir: v.streamDir(info.Name), ReadAhead: v.readAhead, Disk: v.streamDisk(), Log: v.log})
	if err != nil {
		if errors.Is(err, queue.ErrInvalidArgument) {
			return nil, errorf(ErrPrecondition, "%s", trimKind(err))
		}
		return nil, err
	}
	return q, nil
}
