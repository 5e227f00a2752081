// Package meta is the broker's metadata: vhosts, users, permissions,
// policies, and every exchange, queue and binding (durable or not: every
// node routes by them), each queue with its placement (the node that holds
// it) and, when exclusive, its owning connection.
//
// Every change is a Command applied to an in-memory State. State.Apply is
// deterministic and ignores a command State.Validate refuses, so a Raft FSM
// can apply the same commands on every node and reach the same state.
// Declares are arbitrated there: OpDeclareQueue and OpDeclareExchange create
// what is absent and otherwise check equivalence (RabbitMQ's rules and
// wording, an *Error of Kind ErrInequivalent or ErrLocked), so concurrent
// declares of one name agree on every node. Removing bindings deletes the
// auto-delete exchanges left without any, as the routing table does.
//
// Local is the single-node Store (meta.log). Each write is validated, appended to
// meta.log as one record (4-byte big-endian length, CRC-32C of the payload,
// the JSON command) and fsynced before it is applied and the call returns;
// the state in memory is built from the record as a replay would read it
// back, so a restart changes nothing (whole JSON numbers in arguments and
// policy definitions become int64). On open the log is replayed; the first
// record that is short, has a bad checksum or does not decode ends it, and the
// file is cut there (a torn tail from a crash mid-write). When the log is
// larger than 1 MiB and twice the last snapshot it is rewritten as one
// snapshot record: written to a temp file, fsynced, renamed over the log, the
// directory fsynced; so compaction is amortized O(1) per write.
//
// Concurrency: writers serialize on applyMu (so events follow log order),
// then take mu for the log and state; readers take mu's read lock and get
// copies. Subscribers run after each applied command, in order, on the
// writing goroutine, holding applyMu but not mu: they may read the store but
// must not write to it (that would deadlock) nor block long.
//
// Raft is the Store of a cluster node: the same State replicated by one
// hashicorp/raft group ("meta", see broker/cluster/raftgroup) on the node's
// log store and Network. Its state machine (raft_fsm.go) applies the same
// JSON commands Local logs: decode (and normalize), State.Validate, then
// State.Apply; a refused command changes nothing and is answered with its
// error, the same on every node, and the FSM stays generic over Command, so
// a new op needs no change there. Subscribers get each applied command's
// event in log order on every node; a snapshot is the State (with the
// applied index, a count of commands and the write sessions), and
// installing one from the leader replaces the state and publishes a Reset
// event, after which a subscriber rebuilds what it derived from reads.
//
// Writes from any node: the leader applies (raft batches concurrent writes
// into one log write); a follower sends the command to the leader
// (Network.Call "meta.apply"), which applies it and answers the entry's
// index, and the follower then waits until its own state machine applied
// that index. So on every node a write returns after this node's
// subscribers saw its event (read-your-writes). With no leader known the
// writer waits for one (bounded by ctx); a node that is not the leader
// answers with the leader's name and the write goes again. A refusal
// crosses nodes as a gRPC status (ErrNotFound as NotFound, ErrInvalid as
// InvalidArgument, an *Error's Kind ErrInequivalent as FailedPrecondition
// and ErrLocked as Aborted, with its Text) and comes back as the same
// error: errors.Is, errors.As and the RabbitMQ wording hold on the caller.
// A write whose leader is lost before it answered (ErrLeadershipLost, or
// the leader unreachable) is sent again, and both copies may reach the
// log: each write carries a request id (a session per OpenRaft and a
// sequence number), and the state machine answers a copy of a write it
// applied with the first copy's outcome without applying it again, and
// drops a late copy of a write its session saw answered
// (raft_session.go); so a write applies exactly once and its event is
// published once. A write whose ctx ends first may still apply. Reads are
// local; Sync(ctx) waits until this node applied everything the leader
// had committed when it was called.
//
// Migration from the single-node layout: when the bootstrapping node finds
// <data_dir>/meta.log, its whole State goes in as one snapshot command,
// only if the group never applied a command, then meta.log is renamed
// meta.log.migrated and the directory synced; a crash at any step is
// finished by the next open (the command count, replicated, says whether
// the state is in), so it is applied exactly once. A meta.log found beside
// an existing meta.log.migrated on a group with state is left alone, with
// a warning.
//
// Throughput of Raft (BenchmarkRaftPutQueue: PutQueue from 64 concurrent
// writers spread over the members, the real log store with its fdatasync;
// 2026-11-25, 2 shared vCPUs running every member):
//
//	members   transport           declares/s
//	1         in-memory twin      51,000-85,000
//	3         in-memory twin      18,500-20,700
//	3         gRPC on loopback    10,600-13,700
//
// Concurrent writes share log writes (raftgroup batches what queued), so
// the rate is bound by CPU (JSON, the state machine on every member), not
// by fdatasync.
//
// Concurrency of Raft: raft's FSM goroutine applies entries one at a time
// under fsm.mu (readers take its read lock) and runs the subscribers
// after each with no lock held; they may read the store and Subscribe,
// must not write to it (the write would wait for that goroutine) nor block
// long. fsm.subMu and fsm.idxMu (the applied index writers wait on) are
// leaves.
//
// Definitions (Export, Import, ImportAccess) use RabbitMQ's definitions JSON,
// so a RabbitMQ export imports here and the other way round. Passwords use
// RabbitMQ's rabbit_password_hashing_sha256. CheckPermission and MatchPolicy
// follow RabbitMQ: patterns are regular expressions searched (unanchored) in
// the name; an empty permission pattern denies.
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package meta
