// Package transport carries everything nodes say to each other: the Raft
// RPCs of every group on a node (metadata, quorum queues, streams) and
// node-level calls, over one connection per peer.
//
// Network is the seam. Its gRPC implementation multiplexes all groups on a
// few long-lived streams per peer (control: heartbeats and votes; data:
// appends and forwarded client traffic; snapshots in chunks), each message
// tagged with its group id; what is queued for a peer goes out in one frame
// when the queue runs dry.
//
// # The in-memory twin
//
// InmemHub connects Networks in one process for fast tests (NewInmemHub,
// then hub.Network(name) per node), with the same names, status codes and
// concurrency contract as the gRPC Network: a call to an unknown, closed or
// cut-off node, or a Raft RPC for a group the target has not opened, fails
// with codes.Unavailable; calls and RPCs in flight when their link is cut
// fail the same way; handlers run on goroutines of their own, any number
// at once; a call to the node itself runs in place. Requests and answers
// are copied as if they crossed a wire. Fault controls: Partition(a, b)
// cuts one link, Isolate(node) all of a node's links, Heal undoes both; a
// node goes down by closing its Network and restarts by asking the hub for
// it again. Watch reports each change of a peer's reachability.
//
// # Group transports
//
// Group(id) is a raft.Transport (with WithClose and WithPreVote) whose
// ServerAddress values are node names. Shared by both implementations: an
// RPC that arrives for a group goes to Raft's consumer channel, except a
// heartbeat (an empty AppendEntries), which goes to the handler Raft sets
// with SetHeartbeatHandler so it never waits behind a group busy on disk.
// Each RPC is bounded by DefaultRPCTimeout (an InstallSnapshot gets one
// more second per MiB); closing the transport fails the RPCs in flight,
// closes its AppendEntries pipelines and frees the id for a new transport.
//
// Lock chains that cross packages are in one list: LOCKS.md at the
// repository root. Locks here are leaves: no lock is held while a handler,
// a watcher or Raft code runs (InmemHub.mu → watchers.mu is the one nesting,
// and watchers.mu only guards a queue).
package transport
