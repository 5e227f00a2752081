package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/raftgroup"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// RaftGroupID is the metadata's Raft group id (in the log store and on the
// Network).
const RaftGroupID = "meta"

// The node-level calls of the metadata group: a follower sends a write to
// the leader with applyMethod, and asks it for its applied index with
// syncMethod.
const (
	applyMethod = "meta.apply"
	syncMethod  = "meta.sync"
)

// RaftConfig opens the metadata store of a node of a cluster.
type RaftConfig struct {
	// Dir is the node's data directory: snapshots go in Dir/meta-raft, and
	// a single-node layout's Dir/meta.log is migrated (see OpenRaft).
	Dir string
	// Network links the node to its peers; its Node() is this node's name.
	Network transport.Network
	// Stores is the node's Raft log store.
	Stores logstore.GroupStores
	// Logger gets the group's log lines; nil discards them.
	Logger *slog.Logger
	// Timing tunes the group (zero: raftgroup's defaults).
	Timing raftgroup.Timing
	// Bootstrap: this node starts a new cluster (a one-member group of
	// itself) when the group has no state, and migrates Dir/meta.log.
	Bootstrap bool
	// WriteTimeout bounds a write whose ctx has no earlier deadline (a
	// client connection's): without a majority, it fails with ErrUnavailable
	// instead of waiting for the partition to heal [30s].
	WriteTimeout time.Duration
	// AdoptAlone: a node alone (no seeds, no DNS) whose name changed takes
	// over the one-member group of its old name (raftgroup.Config.AdoptAlone)
	// when the metadata's node table shows that name was this node alone:
	// one entry, with Incarnation as its id (raft_join.go).
	AdoptAlone bool
	// Incarnation is this node's incarnation id (Node.ID).
	Incarnation string

	// crashAt, in tests, makes OpenRaft stop at a migration step as if the
	// process died there (the group is closed, nothing else is undone).
	crashAt string
}

// Raft is the metadata Store of a cluster node: a State replicated by one
// Raft group. Reads come from this node's copy; writes go through the
// leader (forwarded from a follower) and return once this node applied
// them. See the package doc.
type Raft struct {
	group *raftgroup.Group
	net   transport.Network
	fsm   *fsm
	log   *slog.Logger
	dir   string

	writer *writer // numbers this store's writes (exactly-once, raft_session.go)

	crashAt      string // see RaftConfig.crashAt
	writeTimeout time.Duration

	closeOnce sync.Once
	closeErr  error
}

var _ Store = (*Raft)(nil)

// OpenRaft opens the metadata group on this node. With cfg.Bootstrap, a
// group without state becomes a one-member cluster of this node (or call
// Bootstrap later), and a Dir/meta.log left by the single-node store
// (Local) is applied as one command, then renamed meta.log.migrated. A
// migration a crash interrupted is finished on the next open.
func OpenRaft(ctx context.Context, cfg RaftConfig) (*Raft, error) {
	if cfg.Network == nil || cfg.Stores == nil || cfg.Dir == "" {
		return nil, errors.New("meta: RaftConfig needs Dir, Network and Stores")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := newFSM()
	g, err := raftgroup.Open(raftgroup.Config{
		ID:          RaftGroupID,
		Node:        cfg.Network.Node(),
		Network:     cfg.Network,
		Stores:      cfg.Stores,
		SnapshotDir: filepath.Join(cfg.Dir, "meta-raft"),
		FSM:         f,
		Logger:      logger,
		Timing:      cfg.Timing,
		AdoptAlone:  adoptAlone(cfg),
	})
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	r := &Raft{group: g, net: cfg.Network, fsm: f, log: logger.With("group", RaftGroupID), dir: cfg.Dir,
		writer: newWriter(cfg.Network.Node()), crashAt: cfg.crashAt, writeTimeout: cfg.WriteTimeout}
	if r.writeTimeout <= 0 {
		r.writeTimeout = 30 * time.Second
	}
	cfg.Network.Handle(applyMethod, r.handleApply)
	cfg.Network.Handle(syncMethod, r.handleSync)
	switch {
	case g.Fresh() && cfg.Bootstrap:
		err = r.Bootstrap(ctx)
	case !g.Fresh():
		// A bootstrapping node cut short (a crash) between its bootstrap
		// and the end of the migration finishes it now.
		err = r.resumeMigration(ctx)
	}
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// Bootstrap makes a Fresh group a one-member cluster of this node and
// migrates Dir/meta.log into it (see OpenRaft). raftgroup.ErrNotFresh when
// the group has state.
func (r *Raft) Bootstrap(ctx context.Context) error {
	if err := r.group.Bootstrap(ctx); err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	return r.migrate(ctx, r.dir, r.crashAt)
}

// resumeMigration finishes a migration a crash cut short: when meta.log
// is still there and the group is this node alone.
func (r *Raft) resumeMigration(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(r.dir, logName)); err != nil {
		return nil
	}
	servers, err := r.group.Configuration(ctx)
	if err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	if len(servers) != 1 || servers[0].Node != r.net.Node() {
		r.log.Warn("meta.log left in place: the metadata group has other members", "file", filepath.Join(r.dir, logName))
		return nil
	}
	return r.migrate(ctx, r.dir, r.crashAt)
}

// Group is the store's Raft group: leadership, membership, diagnostics.
func (r *Raft) Group() *raftgroup.Group { return r.group }

// Close leaves the group running on the other nodes; this node's writes
// in flight fail with ErrClosed.
func (r *Raft) Close() error {
	r.closeOnce.Do(func() {
		close(r.fsm.closed)
		if err := r.group.Close(); err != nil {
			r.closeErr = fmt.Errorf("meta: %w", err)
		}
	})
	return r.closeErr
}

func (r *Raft) isClosed() bool {
	select {
	case <-r.fsm.closed:
		return true
	default:
		return false
	}
}

// Subscribe implements Store. fn runs on the group's apply goroutine,
// after each applied command, in log order, and after a Reset.
func (r *Raft) Subscribe(fn func(Event)) func() { return r.fsm.subscribe(fn) }

// apply commits c through the leader and returns once this node applied it.
func (r *Raft) apply(ctx context.Context, c Command) error {
	_, err := r.applyChanged(ctx, c)
	return err
}

// applyChanged is apply reporting whether the command changed anything
// (published an event).
func (r *Raft) applyChanged(ctx context.Context, c Command) (bool, error) {
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > r.writeTimeout {
		parent := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.writeTimeout)
		defer cancel()
		changed, err := r.applyBounded(ctx, c)
		if err != nil && parent.Err() == nil && ctx.Err() != nil {
			return false, fmt.Errorf("%w: the cluster did not commit the change within %v (no majority of the members reachable from this node?): %v", ErrUnavailable, r.writeTimeout, err)
		}
		return changed, err
	}
	return r.applyBounded(ctx, c)
}

// applyBounded is applyChanged under a ctx that bounds it.
func (r *Raft) applyBounded(ctx context.Context, c Command) (bool, error) {
	req := r.writer.start()
	defer r.writer.done(req)
	data, err := json.Marshal(entry{Command: c, Req: req})
	if err != nil {
		return false, fmt.Errorf("meta: encode command: %w", err)
	}
	if len(data) > maxRecord {
		return false, fmt.Errorf("%w: command of %d bytes (at most %d)", ErrInvalid, len(data), maxRecord)
	}
	for attempt := 0; ; attempt++ {
		if r.isClosed() {
			return false, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		changed, retry, err := r.applyOnce(ctx, data)
		if errors.Is(err, raftgroup.ErrClosed) {
			return false, fmt.Errorf("%w (%v)", ErrClosed, err)
		}
		if !retry {
			return changed, err
		}
		r.log.Warn("meta write retried", "attempt", attempt, "error", err)
		if werr := backoff(ctx, attempt); werr != nil {
			return false, fmt.Errorf("meta: write not committed (last try: %v): %w", err, werr)
		}
	}
}

// applyOnce tries a write once: on this node when it leads, else forwarded
// to the leader. retry: the write may go again (not applied, or maybe
// applied by a leader lost before it answered: the state machine knows a
// copy by its request id).
func (r *Raft) applyOnce(ctx context.Context, data []byte) (changed, retry bool, err error) {
	if r.group.IsLeader() {
		res, _, err := r.group.Apply(ctx, data)
		if err != nil {
			return false, retryable(err), err
		}
		ar := res.(applyResult)
		return ar.changed, false, ar.err
	}
	leader := r.group.Leader()
	if leader == "" {
		if leader, err = r.group.WaitLeader(ctx); err != nil {
			return false, false, err
		}
	}
	if leader == r.net.Node() {
		return false, true, raftgroup.ErrNotLeader // we just became leader: go again
	}
	fctx, moved := r.whileLeader(ctx, leader)
	ans, err := r.forward(fctx, leader, data)
	if err != nil {
		if moved() && ctx.Err() == nil {
			// The leader we sent it to was replaced (it hung, or was cut
			// off): send it to the new one rather than wait for the old.
			return false, true, fmt.Errorf("%w: the leadership moved from %s while a write waited for it (%v)", raftgroup.ErrNotLeader, leader, err)
		}
		return false, isUnavailable(err), err
	}
	if ans.Index == 0 {
		return false, true, fmt.Errorf("%w: %s redirects to %q", raftgroup.ErrNotLeader, leader, ans.Leader)
	}
	if err := r.fsm.waitApplied(ctx, ans.Index); err != nil {
		return false, false, err
	}
	return ans.Changed, false, nil
}

// whileLeader returns a context that ends with ctx or when this node
// learns of another leader than leader (or none), and moved, which stops
// the watch and reports whether the leadership moved. A write forwarded to
// a leader that stopped answering (paused, cut off) goes to its successor
// at once instead of waiting for it: the state machine drops a copy it has
// applied (request ids), so sending it again is safe.
func (r *Raft) whileLeader(ctx context.Context, leader string) (context.Context, func() bool) {
	fctx, cancel := context.WithCancel(ctx)
	var changed atomic.Bool
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(100 * time.Millisecond) // a dropped observation
		defer tick.Stop()
		for {
			ch := r.group.LeaderChanged()
			if r.group.Leader() != leader {
				changed.Store(true)
				cancel()
				return
			}
			select {
			case <-ch:
			case <-tick.C:
			case <-fctx.Done():
				return
			case <-done:
				return
			}
		}
	}()
	return fctx, func() bool {
		close(done)
		cancel()
		return changed.Load()
	}
}

func retryable(err error) bool {
	return errors.Is(err, raftgroup.ErrNotLeader) || errors.Is(err, raftgroup.ErrLeadershipLost)
}

// backoff waits before retry attempt: 5ms doubling up to 200ms.
func backoff(ctx context.Context, attempt int) error {
	d := 5 * time.Millisecond << min(attempt, 6)
	d = min(d, 200*time.Millisecond)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
