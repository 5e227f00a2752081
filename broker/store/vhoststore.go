package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// VhostStore owns one vhost's storage: its message store, its queues'
// directories and the group-commit syncer.
type VhostStore struct {
	dir    string
	disk   *DiskWatch // may be nil
	log    *slog.Logger
	msgs   *MessageStore
	syncer *syncer
	// readBufs lends queues the buffers they read segments with, so idle
	// queues hold none.
	readBufs sync.Pool

	mu     sync.Mutex
	closed bool
}

// getBuf lends a buffer of n bytes; give it back with putBuf.
func (v *VhostStore) getBuf(n int) *[]byte {
	if b, ok := v.readBufs.Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

func (v *VhostStore) putBuf(b *[]byte) {
	if cap(*b) <= maxBodySpan {
		v.readBufs.Put(b)
	}
}

// StoreStats describes a vhost's message store.
type StoreStats struct {
	Files     int
	Bytes     int64
	LiveBytes int64
	Messages  int
	// FsyncSeconds are recent group-commit fsync durations, drained on read.
	FsyncSeconds []float64
}

// VhostConfig configures a vhost's storage.
type VhostConfig struct {
	// Dir holds the vhost's message store and queue directories.
	Dir string
	// Disk (may be nil) is told what is about to be written and when a
	// write finds the disk full, for the disk alarm.
	Disk *DiskWatch
	// Log receives the repairs recovery makes (nil: slog.Default()).
	Log *slog.Logger
}

// OpenVhost opens (or creates) the storage under cfg.Dir and recovers the
// message store. Queues are opened with OpenQueue; call RecoveryDone once
// every queue that exists has been opened, so unreferenced messages go.
func OpenVhost(ctx context.Context, cfg VhostConfig) (*VhostStore, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	dir := cfg.Dir
	if err := os.MkdirAll(filepath.Join(dir, queuesDir), 0o750); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", dir, err)
	}
	msgs, err := openMessageStore(filepath.Join(dir, msgStore), cfg.Disk, cfg.Log)
	if err != nil {
		return nil, err
	}
	v := &VhostStore{dir: dir, msgs: msgs, disk: cfg.Disk, log: cfg.Log}
	v.syncer = newSyncer(msgs)
	return v, nil
}

func (v *VhostStore) queueDir(name string) string {
	return queueDir(v.dir, name)
}

// OpenQueue opens a queue's index, recovering its entries.
func (v *VhostStore) OpenQueue(ctx context.Context, name string, opts Options) (*QueueIndex, Recovery, error) {
	if err := ctx.Err(); err != nil {
		return nil, Recovery{}, err
	}
	return openQueueIndex(v, v.queueDir(name), opts)
}

// RecoveryDone frees messages no recovered queue references and enables
// message-store compaction.
func (v *VhostStore) RecoveryDone() { v.msgs.recoveryDone() }

// DeleteQueue removes a queue's files; the caller has closed its index
// after releasing (acking) its entries, or the files are simply dropped.
func (v *VhostStore) DeleteQueue(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.RemoveAll(v.queueDir(name)); err != nil {
		return fmt.Errorf("store: delete queue %q: %w", name, err)
	}
	syncDir(filepath.Join(v.dir, queuesDir))
	return nil
}

// Stats reports the message store's state.
func (v *VhostStore) Stats() StoreStats {
	files, bytes, live, n := v.msgs.Stats()
	return StoreStats{Files: files, Bytes: bytes, LiveBytes: live, Messages: n, FsyncSeconds: v.syncer.drainLatencies()}
}

// Close stops the syncer and closes the message store.
func (v *VhostStore) Close() error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	v.mu.Unlock()
	v.syncer.stop()
	return v.msgs.close()
}

// syncer batches fsync requests: each round fsyncs the union of the files
// of every waiting request (and the message store's), in parallel, then
// calls their callbacks.
type syncer struct {
	msgs *MessageStore

	mu        sync.Mutex
	pending   []syncReq
	wake      chan struct{}
	done      chan struct{}
	latencies []float64
}

type syncReq struct {
	files []*os.File
	done  func(error)
}

func newSyncer(msgs *MessageStore) *syncer {
	s := &syncer{msgs: msgs, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *syncer) request(ctx context.Context, files []*os.File, done func(error)) {
	s.mu.Lock()
	s.pending = append(s.pending, syncReq{files: files, done: done})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *syncer) loop() {
	for {
		select {
		case <-s.wake:
		case <-s.done:
			s.round()
			return
		}
		s.round()
	}
}

func (s *syncer) round() {
	s.mu.Lock()
	reqs := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(reqs) == 0 {
		return
	}
	start := time.Now()
	seen := map[*os.File]bool{}
	var files []*os.File
	for _, r := range reqs {
		for _, f := range r.files {
			if !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	var err error
	msgFiles, ferr := s.msgs.flush()
	if ferr != nil && ferr != ErrClosed {
		err = ferr
	}
	files = append(files, msgFiles...)
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, f := range files {
		wg.Add(1)
		go func(f *os.File) {
			defer wg.Done()
			if e := f.Sync(); e != nil && !os.IsNotExist(e) && !isClosed(e) {
				emu.Lock()
				err = fmt.Errorf("store: fsync %s: %w", f.Name(), e)
				emu.Unlock()
			}
		}(f)
	}
	wg.Wait()
	s.mu.Lock()
	if len(s.latencies) < 4096 {
		s.latencies = append(s.latencies, time.Since(start).Seconds())
	}
	s.mu.Unlock()
	for _, r := range reqs {
		r.done(err)
	}
}

func isClosed(err error) bool {
	return err != nil && (err == os.ErrClosed || os.IsNotExist(err) || isErrClosed(err))
}

func isErrClosed(err error) bool {
	pe, ok := err.(*os.PathError)
	return ok && pe.Err == os.ErrClosed
}

func (s *syncer) drainLatencies() []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.latencies
	s.latencies = nil
	return out
}

func (s *syncer) stop() {
	close(s.done)
}
