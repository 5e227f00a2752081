package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/warrenmq/warren/broker/store/streamlog"
)

// StreamConfig configures a stream queue.
type StreamConfig struct {
	Info Info
	Args Args
	// Dir is the stream's log directory.
	Dir string
	Log *slog.Logger
}

// Stream is a queue of type stream: an append-only log (streamlog.Log).
// The stream protocol server (broker/stream) publishes and reads through
// Log directly. Over AMQP, publishing to and consuming from a stream are
// the AMQP stream queue type's work, not done here: publishes are refused
// (negative confirm) and Consume/Get return ErrUnsupported.
type Stream struct {
	info Info
	log  *streamlog.Log

	mu      sync.Mutex
	deleted chan struct{}
	gone    bool
}

// OpenStream opens (creating if needed) a stream's log.
func OpenStream(ctx context.Context, cfg StreamConfig) (*Stream, error) {
	if !cfg.Info.Durable || cfg.Info.Exclusive || cfg.Info.AutoDelete {
		return nil, fmt.Errorf("%w: queue '%s' of type stream must be durable, neither exclusive nor auto-delete", ErrInvalidArgument, cfg.Info.Name)
	}
	opts := streamlog.Options{MaxAge: cfg.Args.MaxAge}
	if cfg.Args.MaxLengthBytes > 0 {
		opts.MaxBytes = cfg.Args.MaxLengthBytes
	}
	if cfg.Args.StreamMaxSegmentSize > 0 {
		opts.MaxSegmentBytes = cfg.Args.StreamMaxSegmentSize
	}
	l, err := streamlog.Open(cfg.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open stream %q: %w", cfg.Info.Name, err)
	}
	return &Stream{info: cfg.Info, log: l, deleted: make(chan struct{})}, nil
}

// Log is the stream's log.
func (s *Stream) Log() *streamlog.Log { return s.log }

// Deleted is closed when the stream is deleted or closed.
func (s *Stream) Deleted() <-chan struct{} { return s.deleted }

func (s *Stream) markGone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return false
	}
	s.gone = true
	close(s.deleted)
	return true
}

// Info implements Queue.
func (s *Stream) Info() Info { return s.info }

// Publish implements Queue: AMQP publishing into a stream is refused.
func (s *Stream) Publish(batch []Publish) {
	for _, p := range batch {
		if p.Confirm != nil {
			p.Confirm.Confirm([]uint64{p.Tag}, false)
		}
	}
}

// Throttle implements Queue.
func (s *Stream) Throttle(ctx context.Context) error { return nil }

// Ack implements Queue (nothing to settle).
func (s *Stream) Ack(seqs []uint64) {}

// Requeue implements Queue.
func (s *Stream) Requeue(seqs []uint64) {}

// Reject implements Queue.
func (s *Stream) Reject(seqs []uint64) {}

// Consume implements Queue.
func (s *Stream) Consume(ctx context.Context, c Consumer, opts ConsumeOptions) error {
	return ErrUnsupported
}

// Cancel implements Queue.
func (s *Stream) Cancel(c Consumer) {}

// Wake implements Queue.
func (s *Stream) Wake() {}

// Get implements Queue.
func (s *Stream) Get(ctx context.Context, noAck bool) (Delivery, bool, error) {
	return Delivery{}, false, ErrUnsupported
}

// Purge implements Queue.
func (s *Stream) Purge(ctx context.Context) (int, error) { return 0, ErrUnsupported }

// Delete implements Queue: it removes the log's files.
func (s *Stream) Delete(ctx context.Context, ifUnused, ifEmpty bool) (int, error) {
	n := s.Stats().Ready
	if !s.markGone() {
		return 0, ErrDeleted
	}
	if err := s.log.Delete(); err != nil {
		return n, err
	}
	return n, nil
}

// Stats implements Queue: Ready is the number of offsets in the log.
func (s *Stream) Stats() Stats {
	st := s.log.Stats()
	n := 0
	if st.FirstOffset >= 0 {
		n = int(int64(st.NextOffset) - st.FirstOffset)
	}
	return Stats{Ready: n, ReadyBytes: st.Bytes}
}

// Close implements Queue.
func (s *Stream) Close(ctx context.Context) error {
	if !s.markGone() {
		return ErrStopped
	}
	if err := s.log.Close(); err != nil && !errors.Is(err, streamlog.ErrClosed) {
		return err
	}
	return nil
}
