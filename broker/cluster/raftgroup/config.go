package raftgroup

import (
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/warrenmq/warren/broker/cluster/logstore"
	"github.com/warrenmq/warren/broker/cluster/transport"
)

// Config opens one group on one node.
type Config struct {
	// ID is the group's id: the Network's and the log store's group id.
	ID string
	// Node is this node's name: its raft ServerID and ServerAddress.
	Node string
	// Network carries the group's RPCs (Network.Group(ID)).
	Network transport.Network
	// Stores holds the node's Raft logs; Stores.Group(ID) is this group's.
	Stores logstore.GroupStores
	// SnapshotDir holds the group's snapshots (the newest two are kept).
	SnapshotDir string
	// FSM is the state machine; a raft.BatchingFSM gets batches.
	FSM raft.FSM
	// Logger gets raft's log lines, with the group id; nil discards them.
	Logger *slog.Logger
	// Timing tunes the group; zero fields take the defaults.
	Timing Timing
	// Bootstrap: when the group has no state at all (no log, no term, no
	// snapshot), make it a one-member cluster of this node. Exactly one node
	// of a new cluster bootstraps; the others are added with AddVoter.
	Bootstrap bool
	// AdoptAlone: when the group's configuration is one voter that is not
	// this node (the node was renamed: the data directory is that voter's),
	// make it this node (raft's RecoverCluster), if AdoptAlone.Alone finds in
	// the group's state that this node was that voter (see Adopt). With one
	// member there is nobody to disagree. Nil, or with more members, a node
	// that is not in its group's configuration gets ErrNotMember from Open.
	AdoptAlone *Adopt
}

// Timing tunes a group; a zero field takes the default in brackets.
type Timing struct {
	// HeartbeatTimeout: a follower without contact from the leader for this
	// long (randomized up to twice) starts an election [5s]. The leader
	// heartbeats each follower at a tenth to a fifth of it (hashicorp/raft
	// fixes that ratio): every 0.5-1 s by default, often enough that the
	// transport's node heartbeat (after 1 s of silence) is mostly quiet
	// between a leader and its followers (a heartbeat late by a scheduling
	// delay lets one through) and a lost packet's retransmission fits in
	// the 1.5 s lease (0.5 s of room), seldom enough that an idle cluster
	// costs little. A leader
	// whose node is known dead (the transport's Watch) is replaced within
	// a lease, not a heartbeat timeout (failover.go); so is one unknown when
	// the group opens.
	HeartbeatTimeout time.Duration
	// ElectionTimeout: a candidate without a result for this long
	// (randomized up to twice) starts again [5s: raft wants at least the
	// heartbeat timeout]; the lease while the group hurries (failover.go).
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout: a leader out of contact with a quorum for this
	// long steps down [1.5s]; at most HeartbeatTimeout, and above the
	// leader's heartbeat period (a fifth of HeartbeatTimeout) with room for
	// a lost packet's retransmission. While the leader is unknown the
	// heartbeat and election timeouts drop to it (failover.go).
	LeaderLeaseTimeout time.Duration
	// CommitTimeout: when no new commands flow, the leader tells followers
	// the commit index at least this often (randomized up to twice) [2s];
	// a follower that comes back is caught up within it too. Each group
	// sends one small RPC per follower per period, so it is long: an idle
	// cluster costs little. A follower still applies a command soon after
	// its commit: Apply nudges the followers (a barrier appended after the
	// commit, one per batch of commits under load).
	CommitTimeout time.Duration
	// MaxAppendEntries: the most commands one log write and one
	// AppendEntries RPC carry; Apply calls queue in a channel of this size,
	// so concurrent Applies share one log write (one fdatasync) [256].
	MaxAppendEntries int
	// SnapshotInterval: how often (randomized up to twice) the group checks
	// whether to snapshot [2m].
	SnapshotInterval time.Duration
	// SnapshotThreshold: the log entries since the last snapshot that make
	// the next check take one [8192].
	SnapshotThreshold uint64
	// TrailingLogs: entries kept after a snapshot, so a follower that
	// fell behind by fewer catches up from the log, not a snapshot [10240].
	TrailingLogs uint64
}

func (t Timing) withDefaults() Timing {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&t.HeartbeatTimeout, 5*time.Second)
	set(&t.ElectionTimeout, 5*time.Second)
	set(&t.LeaderLeaseTimeout, 1500*time.Millisecond)
	if t.LeaderLeaseTimeout > t.HeartbeatTimeout {
		t.LeaderLeaseTimeout = t.HeartbeatTimeout
	}
	set(&t.CommitTimeout, 2*time.Second)
	set(&t.SnapshotInterval, 2*time.Minute)
	if t.MaxAppendEntries <= 0 {
		t.MaxAppendEntries = 256
	}
	if t.SnapshotThreshold == 0 {
		t.SnapshotThreshold = 8192
	}
	if t.TrailingLogs == 0 {
		t.TrailingLogs = 10240
	}
	return t
}
