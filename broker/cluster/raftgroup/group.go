package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Errors.
var (
	// ErrNotLeader: this node is not the group's leader (or stopped being it
	// before the command was appended): the command was not applied.
	ErrNotLeader = errors.New("raftgroup: not the leader")
	// ErrLeadershipLost: leadership was lost after the command was
	// appended; it may or may not be committed.
	ErrLeadershipLost = errors.New("raftgroup: leadership lost")
	// ErrClosed: the group is closed (or shut down after its removal).
	ErrClosed = errors.New("raftgroup: closed")
	// ErrNotMember: the group's state says this node is not a member (it
	// was removed, or renamed in a cluster of several).
	ErrNotMember = errors.New("raftgroup: this node is not a member of the group")
	// ErrNotFresh: Bootstrap of a group that already has state.
	ErrNotFresh = errors.New("raftgroup: the group already has state")
)

// Group is one Raft group opened on this node.
type Group struct {
	id      string
	node    string
	raft    atomic.Pointer[raft.Raft] // replaced only by Reset; read through r()
	cfg     Config                    // as opened, for Reset
	log     *slog.Logger
	obsCh   chan raft.Observation
	obs     *raft.Observer
	done    chan struct{}
	wg      sync.WaitGroup
	fresh   atomic.Bool
	closed  sync.Once
	resetMu sync.Mutex // serializes Reset and Close

	nudged atomic.Uint64 // a barrier appended since this index was committed (nudge)

	down atomic.Pointer[error] // why raft is not running since a failed Reset (Down)

	leaderMu      sync.Mutex
	leaderChanged chan struct{} // closed and replaced at each leader change

	timing    Timing
	stopWatch func()
	hurryMu   sync.Mutex // guards hurried and hurriedFrom; a leaf
	hurried   bool       // heartbeat timeout shortened: the leader's node is down (failover.go)
	// hurriedFrom is the leader whose node went down ("" when the group
	// hurried for another reason): naming it is no reason to restore.
	hurriedFrom string
	// hurrying tells watchLeader that a hurry began, to start its tick
	// (one slot: a signal, sent without waiting).
	hurrying chan struct{}
}

// Open opens the group: raft on the node's log store and the group's
// transport, its snapshots in cfg.SnapshotDir. With cfg.Bootstrap and no
// state, the group becomes a one-member cluster of this node.
func Open(cfg Config) (*Group, error) {
	if cfg.ID == "" || cfg.Node == "" || cfg.Network == nil || cfg.Stores == nil || cfg.FSM == nil || cfg.SnapshotDir == "" {
		return nil, errors.New("raftgroup: Config needs ID, Node, Network, Stores, SnapshotDir and FSM")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	logger = logger.With("group", cfg.ID)
	t := cfg.Timing.withDefaults()
	r, had, err := startRaft(cfg, t, logger)
	if err != nil {
		return nil, err
	}
	g := &Group{
		id:            cfg.ID,
		node:          cfg.Node,
		cfg:           cfg,
		log:           logger,
		obsCh:         make(chan raft.Observation, 16),
		done:          make(chan struct{}),
		leaderChanged: make(chan struct{}),
		hurrying:      make(chan struct{}, 1),
		timing:        t,
	}
	g.raft.Store(r)
	g.fresh.Store(!had)
	g.obs = raft.NewObserver(g.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	r.RegisterObserver(g.obs)
	g.wg.Add(1)
	go g.watchLeader()
	g.stopWatch = cfg.Network.Watch(g.peerChanged)

	if cfg.Bootstrap && !had {
		if err := g.Bootstrap(context.Background()); err != nil {
			_ = g.Close()
			return nil, err
		}
	} else if had {
		g.hurryAtOpen()
	}
	return g, nil
}

// startRaft starts raft on the node's log store and the group's
// transport, and reports whether the group had state.
func startRaft(cfg Config, t Timing, logger *slog.Logger) (*raft.Raft, bool, error) {
	hl := newHCLogger(logger, "raft")
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.Node)
	rc.HeartbeatTimeout = t.HeartbeatTimeout
	rc.ElectionTimeout = t.ElectionTimeout
	rc.LeaderLeaseTimeout = t.LeaderLeaseTimeout
	rc.CommitTimeout = t.CommitTimeout
	rc.MaxAppendEntries = t.MaxAppendEntries
	rc.BatchApplyCh = true
	rc.SnapshotInterval = t.SnapshotInterval
	rc.SnapshotThreshold = t.SnapshotThreshold
	rc.TrailingLogs = t.TrailingLogs
	rc.Logger = hl
	rc.NoLegacyTelemetry = true
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, false, fmt.Errorf("raftgroup %s: %w", cfg.ID, err)
	}

	store := cfg.Stores.Group(cfg.ID)
	logs, err := raft.NewLogCache(t.MaxAppendEntries*2, store)
	if err != nil {
		return nil, false, fmt.Errorf("raftgroup %s: log cache: %w", cfg.ID, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.SnapshotDir, 2, hl.Named("snapshot"))
	if err != nil {
		return nil, false, fmt.Errorf("raftgroup %s: snapshot store: %w", cfg.ID, err)
	}
	had, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return nil, false, fmt.Errorf("raftgroup %s: read state: %w", cfg.ID, err)
	}
	trans := cfg.Network.Group(cfg.ID)
	if had {
		if err := checkMember(cfg, rc, logs, store, snaps, trans, logger); err != nil {
			_ = trans.Close()
			return nil, false, err
		}
	}
	r, err := raft.NewRaft(rc, cfg.FSM, logs, store, snaps, trans)
	if err != nil {
		_ = trans.Close()
		return nil, false, fmt.Errorf("raftgroup %s: %w", cfg.ID, err)
	}
	return r, had, nil
}

// r is the group's raft (Reset replaces it).
func (g *Group) r() *raft.Raft { return g.raft.Load() }

// Down reports why the group is down on this node: a Reset that failed
// and could not start raft again leaves it so (every call fails with
// ErrClosed) until the node restarts, which opens the group afresh; nil
// otherwise.
func (g *Group) Down() error {
	if err := g.down.Load(); err != nil {
		return *err
	}
	return nil
}

// Bootstrap makes a Fresh group a one-member cluster of this node (it
// elects itself within an election timeout); others join with AddVoter.
// ErrNotFresh when the group had state at Open, or was bootstrapped.
func (g *Group) Bootstrap(ctx context.Context) error {
	if !g.fresh.Load() {
		return fmt.Errorf("raftgroup %s: bootstrap: %w", g.id, ErrNotFresh)
	}
	err := g.wait(ctx, func() raft.Future {
		return g.r().BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: raft.ServerID(g.node), Address: raft.ServerAddress(g.node),
		}}})
	})
	if errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("raftgroup %s: bootstrap: %w", g.id, ErrNotFresh)
	}
	if err != nil {
		return fmt.Errorf("raftgroup %s: bootstrap: %w", g.id, err)
	}
	g.hurryAtOpen()
	return nil
}

// watchLeader wakes WaitLeader callers at each leader or state change, and
// ends a shortened heartbeat timeout once a leader is known (failover.go).
// While the group is hurried it also looks every second (raft drops
// observations when the channel is full); otherwise its tick is stopped,
// so an idle group does not wake it.
func (g *Group) watchLeader() {
	defer g.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		hurried := true
		select {
		case <-g.obsCh:
			hurried = g.leaderKnown()
			g.leaderMu.Lock()
			close(g.leaderChanged)
			g.leaderChanged = make(chan struct{})
			g.leaderMu.Unlock()
		case <-tick.C:
			hurried = g.leaderKnown()
		case <-g.hurrying:
			tick.Reset(time.Second)
		case <-g.done:
			return
		}
		if !hurried {
			tick.Stop()
		}
	}
}

// LeaderChanged returns a channel closed at the group's next leader or
// state change (an observation may be dropped when many come at once: poll
// Leader too when a missed change matters).
func (g *Group) LeaderChanged() <-chan struct{} { return g.leaderChange() }

func (g *Group) leaderChange() <-chan struct{} {
	g.leaderMu.Lock()
	defer g.leaderMu.Unlock()
	return g.leaderChanged
}

// ID is the group's id.
func (g *Group) ID() string { return g.id }

// Node is this node's name.
func (g *Group) Node() string { return g.node }

// Fresh reports whether the group had no state (no log, term or snapshot)
// when it was opened; it stays so after Bootstrap.
func (g *Group) Fresh() bool { return g.fresh.Load() }

// Leader is the current leader's node name, "" when none is known.
func (g *Group) Leader() string {
	addr, _ := g.r().LeaderWithID()
	return string(addr)
}

// IsLeader reports whether this node leads the group.
func (g *Group) IsLeader() bool { return g.r().State() == raft.Leader }

// WaitLeader returns the leader's node name once one is known, or ctx's
// error, or ErrClosed.
func (g *Group) WaitLeader(ctx context.Context) (string, error) {
	// The observer drops an observation when its channel is full; the
	// ticker bounds how long a dropped one could delay us.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		changed := g.leaderChange()
		if l := g.Leader(); l != "" {
			return l, nil
		}
		if g.r().State() == raft.Shutdown {
			return "", ErrClosed
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-g.done:
			return "", ErrClosed
		case <-ctx.Done():
			return "", fmt.Errorf("raftgroup %s: wait for a leader: %w", g.id, ctx.Err())
		}
	}
}

// Apply appends cmd on the leader and returns, once this node's FSM applied
// it, the FSM's response and the entry's index. ErrNotLeader: not applied,
// send it to the leader. When ctx ends first the command may still be
// applied later.
func (g *Group) Apply(ctx context.Context, cmd []byte) (any, uint64, error) {
	var f raft.ApplyFuture
	if err := g.wait(ctx, func() raft.Future {
		f = g.r().Apply(cmd, timeoutOf(ctx))
		return f
	}); err != nil {
		return nil, 0, err
	}
	g.nudge(f.Index())
	return f.Response(), f.Index(), nil
}

// nudge makes the followers learn that index is committed now rather
// than at the leader's next idle round (CommitTimeout, long so that an
// idle cluster costs little): it appends a barrier, whose replication
// carries the commit index. A follower that forwarded the write and waits
// to apply it answers its client sooner.
//
// A barrier appended after index was committed tells every follower about
// index, so nudged records the applied index (committed, at least index)
// when one is appended and a write it covers appends none: under load one
// barrier serves each batch of writes the leader commits. An entry
// appended after index is no substitute: it may have gone out before index
// was committed, with the older commit index. Barriers are not waited for
// (their futures are dropped), so a commit is never left untold while an
// earlier barrier waits for its own. None in a group of one.
func (g *Group) nudge(index uint64) {
	for {
		covered := g.nudged.Load()
		r := g.r()
		// A mark past the log's end is another raft's (Reset): stale.
		if index <= covered && covered <= r.LastIndex() {
			return
		}
		applied := max(r.AppliedIndex(), index)
		if g.nudged.CompareAndSwap(covered, applied) {
			break
		}
	}
	cf := g.r().GetConfiguration()
	if cf.Error() != nil || len(cf.Configuration().Servers) < 2 {
		return
	}
	// Barrier blocks only while raft's apply queue is full.
	go g.r().Barrier(g.timing.CommitTimeout)
}

// Barrier returns once every entry committed before it has been applied to
// this (leader) node's FSM.
func (g *Group) Barrier(ctx context.Context) error {
	return g.wait(ctx, func() raft.Future { return g.r().Barrier(timeoutOf(ctx)) })
}

// Snapshot takes a snapshot now (and compacts the log up to TrailingLogs).
func (g *Group) Snapshot(ctx context.Context) error {
	return g.wait(ctx, func() raft.Future { return g.r().Snapshot() })
}

// AppliedIndex is the index of the last entry raft handed to the FSM.
func (g *Group) AppliedIndex() uint64 { return g.r().AppliedIndex() }

// Stats is raft's own view of the group (state, term, indexes...), for
// diagnostics.
func (g *Group) Stats() map[string]string { return g.r().Stats() }

// Close shuts raft down (and the group's transport with it); the log and
// snapshots stay for the next Open. Safe to call more than once.
func (g *Group) Close() error {
	var err error
	g.closed.Do(func() {
		g.resetMu.Lock()
		defer g.resetMu.Unlock()
		g.stopWatch()
		err = g.r().Shutdown().Error()
		g.r().DeregisterObserver(g.obs)
		close(g.done)
		g.wg.Wait()
		if err != nil {
			err = fmt.Errorf("raftgroup %s: shutdown: %w", g.id, err)
		}
	})
	return err
}

// wait starts a raft operation and waits for its future or ctx. A future
// cannot be abandoned in raft, so when ctx ends first the operation goes on
// and its outcome is dropped.
func (g *Group) wait(ctx context.Context, start func() raft.Future) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// A raft shut down may take an Apply into its batch channel and never
	// answer it: fail at once (a group down since a failed Reset, or a
	// call that raced a Reset or Close).
	if g.r().State() == raft.Shutdown {
		if down := g.Down(); down != nil {
			return down
		}
		return fmt.Errorf("raftgroup %s: %w", g.id, ErrClosed)
	}
	f := start()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return g.mapErr(err)
	case <-ctx.Done():
		return fmt.Errorf("raftgroup %s: %w", g.id, ctx.Err())
	}
}

func (g *Group) mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrNotVoter),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("raftgroup %s: %w (leader %q)", g.id, ErrNotLeader, g.Leader())
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("raftgroup %s: %w", g.id, ErrLeadershipLost)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("raftgroup %s: %w", g.id, ErrClosed)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("raftgroup %s: %w", g.id, context.DeadlineExceeded)
	}
	return fmt.Errorf("raftgroup %s: %w", g.id, err)
}

// timeoutOf is how long raft may take to enqueue an operation: until ctx's
// deadline, or without a bound (0) when ctx has none.
func timeoutOf(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	if d := time.Until(dl); d > 0 {
		return d
	}
	return time.Nanosecond
}
