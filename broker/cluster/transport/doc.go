// Package transport carries everything nodes say to each other: the Raft
// RPCs of every group on a node (metadata, quorum queues, streams) and
// node-level calls, over one connection per peer.
//
// Network is the seam. Its gRPC implementation multiplexes all groups on a
// few long-lived streams per peer (control: heartbeats and votes; data:
// appends and forwarded client traffic; snapshots in chunks), each message
// tagged with its group id; what is queued for a peer goes out in one frame
// when the queue runs dry. The in-memory twin connects Networks in one
// process for fast tests, with the same names, errors and concurrency
// contract.
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package transport
