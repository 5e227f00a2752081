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
	// ReadAhead is the vhost's read-ahead setting, for AMQP consumers (nil:
	// streamlog's default).
	ReadAhead *streamlog.ReadAhead
	// Disk (may be nil) is told what the stream writes, for the disk alarm.
	Disk streamlog.Disk
	Log  *slog.Logger
}

// Stream is a queue of type stream: an append-only log (streamlog.Log).
// The stream protocol server (broker/stream) publishes and reads through
// Log directly. Over AMQP (stream_amqp.go), a Publish batch becomes one
// chunk of AMQP 1.0 encoded messages, confirmed once durable, and each
// consumer reads the log from its x-stream-offset on its own goroutine.
type Stream struct {
	info Info
	log  *streamlog.Log
	ra   *streamlog.ReadAhead
	amqp streamAMQP

	mu      sync.Mutex
	deleted chan struct{}
	gone    bool
}

// OpenStream opens (creating if needed) a stream's log.
func OpenStream(ctx context.Context, cfg StreamConfig) (*Stream, error) {
	if !cfg.Info.Durable || cfg.Info.Exclusive || cfg.Info.AutoDelete {
		return nil, fmt.Errorf("%w: queue '%s' of type stream must be durable, neither exclusive nor auto-delete", ErrInvalidArgument, cfg.Info.Name)
	}
	opts := streamlog.Options{MaxAge: cfg.Args.MaxAge, Log: cfg.Log, Disk: cfg.Disk}
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
	return &Stream{info: cfg.Info, log: l, ra: cfg.ReadAhead, deleted: make(chan struct{})}, nil
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

// Purge implements Queue.
func (s *Stream) Purge(ctx context.Context) (int, error) { return 0, ErrUnsupported }

// Delete implements Queue: consumers are cancelled, the log's files
// removed.
func (s *Stream) Delete(ctx context.Context, ifUnused, ifEmpty bool) (int, error) {
	n := s.Stats().Ready
	if !s.markGone() {
		return 0, ErrDeleted
	}
	s.stopConsumers(true)
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
	return Stats{Ready: n, ReadyBytes: st.Bytes, Consumers: s.consumerCount()}
}

// Close implements Queue.
func (s *Stream) Close(ctx context.Context) error {
	if !s.markGone() {
		return ErrStopped
	}
	s.stopConsumers(false)
	if err := s.log.Close(); err != nil && !errors.Is(err, streamlog.ErrClosed) {
		return err
	}
	return nil
}
