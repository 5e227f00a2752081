// Package meta is the broker's durable metadata: vhosts, users, permissions,
// policies, and the durable exchanges, queues and bindings.
//
// Every change is a Command applied to an in-memory State; State.Apply is
// deterministic, so a Raft FSM can apply the same commands on every node.
// Local is the single-node Store: it appends each command to a log file (a
// length, a CRC-32C and the JSON command per record) and fsyncs before the
// write returns; on open it replays the log, cutting a torn or corrupt tail,
// and when the log has grown it rewrites it as one snapshot record (written to
// a temp file, fsynced, renamed). Reads are served from memory under a
// read lock. Subscribers are called after each applied command, in order, on
// the writing goroutine, outside the store's lock.
package meta
