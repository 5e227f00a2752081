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
// Local is the single-node Store. Each write is validated, appended to
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
// Definitions (Export, Import, ImportAccess) use RabbitMQ's definitions JSON,
// so a RabbitMQ export imports here and the other way round. Passwords use
// RabbitMQ's rabbit_password_hashing_sha256. CheckPermission and MatchPolicy
// follow RabbitMQ: patterns are regular expressions searched (unanchored) in
// the name; an empty permission pattern denies.
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package meta
