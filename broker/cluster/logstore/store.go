package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// ErrClosed is returned by every operation on a closed Store.
var ErrClosed = errors.New("logstore: closed")

// DefaultSegmentBytes is the size at which the writer starts a new segment.
const DefaultSegmentBytes = 64 << 20

// maxBatch bounds how many requests one write and fdatasync serve.
const maxBatch = 4096

// Options configure a Store. The zero value is usable.
type Options struct {
	// SegmentBytes is the size after which a new segment file is started
	// (default DefaultSegmentBytes). A batch is never split across files.
	SegmentBytes int64
	// Logger receives recovery warnings (a torn tail cut) and segment
	// removals; nil discards them.
	Logger *slog.Logger
}

// Store is the node-wide Raft log store: every group's entries and stable
// values in one sequence of segment files, written by one goroutine that
// group-commits whatever all groups queued with one write and one
// fdatasync. See the package documentation for the contracts.
type Store struct {
	dir  string
	opts Options
	log  *slog.Logger

	reqs       chan *request
	closing    chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once

	// mu guards idx, segs, bySeq, handles and failed. Lock order:
	// Group.wmu before mu; the writer takes mu only around index updates
	// and segment changes, never while writing or syncing.
	mu      sync.RWMutex
	idx     *index
	segs    []*segment // oldest first; the last is the head
	bySeq   map[uint64]*segment
	handles map[string]*Group
	failed  error // a write or sync failed: the store refuses everything

	syncs, records atomic.Uint64 // counters for Stats

	// Writer-owned.
	buf   []byte
	locs  []loc
	marks []int
}

type segment struct {
	seq  uint64
	path string
	f    *os.File
	size int64
}

// request is one group's StoreLogs, DeleteRange or Set, waiting for the
// writer. done is nil for the writer's own rewrites.
type request struct {
	group    string
	logs     []*raft.Log
	moves    []move // the writer's own: live entries copied forward
	del      bool
	drop     bool
	min, max uint64
	key, val []byte
	done     chan error
}

// move is one live entry's record, turned into a kindMove record.
type move struct {
	group string
	index uint64
	raw   []byte
}

// Open opens (creating if needed) the store in dir, recovers every segment
// (cutting a torn tail of the last one) and starts the writer.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("logstore: create %s: %w", dir, err)
	}
	s := &Store{
		dir: dir, opts: opts, log: logger,
		reqs:       make(chan *request, maxBatch),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
		idx:        newIndex(),
		bySeq:      map[uint64]*segment{},
		handles:    map[string]*Group{},
	}
	if err := s.recover(ctx); err != nil {
		s.closeFiles()
		return nil, err
	}
	go s.writer()
	return s, nil
}

// Group returns the log and stable store of group id (created on first
// use; an id is 1 to 65535 bytes). Every call with the same id returns the
// same *Group.
func (s *Store) Group(id string) GroupStore {
	return s.group(id)
}

func (s *Store) group(id string) *Group {
	s.mu.RLock()
	g := s.handles[id]
	s.mu.RUnlock()
	if g != nil {
		return g
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g = s.handles[id]; g == nil {
		g = &Group{s: s, id: id, done: make(chan error, 1)}
		s.handles[id] = g
	}
	return g
}

// Drop durably removes group id: its entries and stable values (a deleted
// queue's or stream's group). Its raft must be shut down first; the same
// id may be used again afterwards, starting empty.
func (s *Store) Drop(id string) error {
	g := s.group(id)
	if err := g.checkID(); err != nil {
		return err
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	s.mu.RLock()
	err := s.failed
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	return s.submit(&request{group: id, drop: true, done: g.done})
}

// Close stops the writer (requests queued but not written get ErrClosed)
// and closes the files. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		<-s.writerDone
		s.mu.Lock()
		s.failed = ErrClosed
		s.mu.Unlock()
		s.closeFiles()
	})
	return nil
}

func (s *Store) closeFiles() {
	for _, seg := range s.segs {
		_ = seg.f.Close()
	}
}

// submit queues r for the writer and waits for its answer.
func (s *Store) submit(r *request) error {
	select {
	case s.reqs <- r:
	case <-s.closing:
		return ErrClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-s.writerDone:
		select {
		case err := <-r.done:
			return err
		default:
			return ErrClosed
		}
	}
}

func (s *Store) segPath(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%016x%s", seq, segmentExt))
}

// readAt reads the record at l. Callers hold mu for reading, so the
// segment cannot be removed meanwhile.
func (s *Store) readAt(l loc) ([]byte, error) {
	seg := s.bySeq[l.seg]
	if seg == nil {
		return nil, fmt.Errorf("logstore: segment %016x of a live record is gone", l.seg)
	}
	b := make([]byte, l.n)
	if _, err := seg.f.ReadAt(b, l.off); err != nil {
		return nil, fmt.Errorf("logstore: read %s at %d: %w", seg.path, l.off, err)
	}
	return b, nil
}

// Stats are counters since Open.
type Stats struct {
	Syncs   uint64 // fdatasyncs of batches (each serves every request in it)
	Records uint64 // records written: log entries, deletes, stable values
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{Syncs: s.syncs.Load(), Records: s.records.Load()}
}
