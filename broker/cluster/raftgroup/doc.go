// Package raftgroup opens one hashicorp/raft group on a node: the metadata
// group, and later one per quorum queue and per stream. A Group runs raft
// on the node's shared pieces: its transport.Network (Network.Group(id)
// carries the group's RPCs), its log store (logstore.GroupStores.Group(id)
// is the LogStore and StableStore, behind a small raft.LogCache), and a
// raft.FileSnapshotStore in the caller's directory keeping two snapshots.
// raft's log lines go to the caller's *slog.Logger (with group=<id>).
//
// # Names
//
// A member's raft ServerID and ServerAddress are both its node name
// (cluster.node_name); the Network resolves names to addresses. So a
// configuration never holds an address and survives address changes.
//
// # Lifecycle
//
// Open starts raft. A group with no state at all (no log entry, no term,
// no snapshot: Fresh) waits for a configuration: Bootstrap (or
// Config.Bootstrap) makes it a one-member cluster of this node, which
// elects itself at once (so does a reopened group whose only member is
// this node: a single node starts in a millisecond, not a heartbeat
// timeout); any other node joins when the leader calls AddVoter for it. A reopened group (not Fresh) restores its latest snapshot into the
// FSM inside Open, then applies the committed entries after it once a
// leader tells it the commit index. Close shuts raft and the group's
// transport down; the log and snapshots stay for the next Open. Reset
// wipes a group that is this node alone (log, term, snapshots; the caller
// empties its FSM in a callback) and restarts raft Fresh, so the node can
// be added to another cluster's group without a restart; Group keeps its
// identity, its raft is swapped (an atomic pointer: calls in flight on the
// old one fail with ErrClosed). A Reset that fails after raft stopped
// starts raft again on the state left; only when that fails too is the
// group down on this node until it restarts, which Down reports (the
// node's health checks fail with it). A reopened group whose configuration is
// one other voter is adopted only with Config.AdoptAlone, whose check reads
// the group's replayed state (adopt.go).
//
// # Contract
//
//   - Apply(ctx, cmd) runs on the leader only (ErrNotLeader elsewhere: the
//     command was not appended) and returns once this node's FSM applied
//     the entry, with the FSM's response and the entry's index.
//     ErrLeadershipLost: appended, outcome unknown (it may still commit).
//     When ctx ends first the caller gets ctx's error and the command may
//     still be applied.
//   - WaitLeader(ctx) returns the leader's node name once one is known.
//   - Barrier, Snapshot, AddVoter, RemoveServer and TransferLeadership
//     follow raft's semantics, waiting for their outcome or ctx; a transfer
//     raft gives up on after an election timeout while this node still
//     leads goes again until ctx ends.
//
// # Throughput
//
// raft's BatchApplyCh is on: Apply calls queue in a channel of
// Timing.MaxAppendEntries (default 256) and the leader takes everything
// queued into one StoreLogs, which the log store writes with one
// fdatasync, and one AppendEntries per follower. So N concurrent Applies
// cost about one log write instead of N (TestConcurrentAppliesShareLogWrites:
// 512 concurrent applies took a handful of writes). An FSM implementing
// raft.BatchingFSM gets the committed entries in batches as well.
// CommitTimeout (default 2s) bounds how late a follower learns a commit
// when no new entries flow; Apply nudges the followers with a barrier, so
// a write forwarded from a follower is applied there soon after the
// leader answers all the same.
//
// # Failure detection
//
// Per node, not per group: the group watches its Network (Network.Watch).
// When the node that leads the group is reported unreachable, the group's
// heartbeat and election timeouts drop to its leader lease until a leader
// is known again, so the followers elect within about a lease instead of
// a heartbeat timeout (failover.go; TestLeaderNodeDownElectsWithinALease:
// a group with a 20s heartbeat timeout fails over in about 0.3s). Many
// idle groups can therefore run with long timers. A false alarm costs at
// most an early election attempt, which pre-vote refuses while the other
// members still hear from the leader.
//
// # Concurrency
//
// Every method of Group is safe for concurrent use. raft calls the FSM's
// Apply/ApplyBatch, Snapshot and Restore from one goroutine; what the FSM
// does there delays every later apply of the group. Waiting methods start
// one goroutine per call to watch raft's future (raft futures take no
// context). The group takes no lock of its callers: it calls out only to
// the FSM, the log store and the Network, under no lock of its own
// (hurryMu, held across raft's ReloadConfig, and leaderMu are leaves;
// resetMu is held by Reset across raft's shutdown and the caller's wipe,
// which runs the caller's FSM subscribers: see LOCKS.md).
package raftgroup
