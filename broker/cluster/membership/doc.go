// Package membership forms a cluster, adds nodes to it and takes them out.
//
// A node's membership is its place in the metadata Raft group's
// configuration (the group every node belongs to) plus its entry in the
// replicated directory of members (name, the address peers dial, the
// incarnation id made with its data directory). Node names are the Raft
// server ids; addresses live only in the directory.
//
// Forming and joining (Start): a node with Raft state is a member already
// and Raft resumes. A fresh node looks for peers through its seeds and DNS
// name, asks each (transport Hello) for its name, and asks each to add it
// (MethodJoin; a member that is not the leader passes the request to the
// leader, which records the node in the directory and then adds it as a
// voter). It forms a new one-member cluster itself only when it has no
// seeds and no DNS name, or when every discovered peer answered, none is in
// a cluster and its own name is the smallest: nodes started together from
// one seed list form one cluster, not several; a seed that does not answer
// holds everyone back rather than risk two clusters.
//
// Join (warren ctl join) moves a node that is alone in a cluster of its
// own into another cluster without a restart: the other cluster's leader
// is asked first (MethodCheckJoin) whether it would admit the node, then
// the caller wipes the node's own state (its group is reset to Fresh), and
// the node asks to be added as a fresh node does. Invariant: once the
// node is wiped it never bootstraps a cluster of its own unless the
// cluster refused it outright (AlreadyExists, PermissionDenied,
// InvalidArgument): a lost answer may hide a committed AddVoter, and a
// bootstrap then would make two clusters count the node. The join is
// recorded on disk (Config.JoinMarker) before the wipe and removed once
// the node holds a configuration that counts it; a node that starts with
// an empty group and the marker resumes the join and never forms one. A
// node whose own Join is under way answers joins through it Unavailable.
// Forgotten (Config) runs
// on the leader when a node is forgotten or leaves, before its directory
// entry goes: the server deletes the queues that lived on it.
//
// A member is never re-added under the name of a node whose disk was
// wiped: the leader refuses a join (codes.AlreadyExists) from a name that is
// a member under another incarnation id until it is forgotten
// (Forget, `warren ctl forget-node`). Leave moves the leadership away first,
// so the group never waits for an election because of a planned departure.
//
// Errors crossing nodes are gRPC status errors: FailedPrecondition (the
// asked node is not in a cluster yet), Unavailable (no leader now),
// AlreadyExists, InvalidArgument.
//
// Concurrency: Membership is safe for concurrent use; its handlers run on
// the Network's goroutines.
package membership
