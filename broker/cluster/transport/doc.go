// Package transport carries everything nodes say to each other: the Raft
// RPCs of every group on a node (metadata, quorum queues, streams) and
// node-level calls: over gRPC for Raft, over a call lane beside it for
// calls (one listening port).
//
// Network is the seam every cluster piece codes against. It has two
// implementations with one contract: the gRPC Network (NewGRPC) and the
// in-memory twin (NewInmemHub) for fast tests. Node names are the
// raft.ServerAddress values; errors that cross nodes are gRPC status errors
// (Unavailable for a peer that cannot be reached, a closed Network or group,
// or a group the target has not opened; Canceled or DeadlineExceeded when
// the caller's context ends; a handler's own code otherwise, Unknown for a
// plain error). The Raft, Call and Watch tests run on both.
//
// # Group transports
//
// Group(id) is a raft.Transport (with WithClose and WithPreVote), shared by
// both Networks (group.go, pipeline.go). An RPC that arrives for a group
// goes to Raft's consumer channel, except a heartbeat (an empty
// AppendEntries), which goes to the handler Raft sets with
// SetHeartbeatHandler, so it never waits behind a group busy on disk. Each
// RPC is bounded by DefaultRPCTimeout (an InstallSnapshot gets one more
// second per MiB). Closing the transport fails its RPCs in flight, closes
// its pipelines and frees the id. AppendEntriesPipeline: over gRPC, appends
// go out at once (up to 128 under way) and their futures come back in
// order; over the twin, one after the other.
//
// # The gRPC Network
//
// Connections. A node dials each peer once: one grpc.ClientConn per peer,
// by node name through a resolver that gives the address SetAddress
// recorded (Hello asks the node behind a seed address for its name). gRPC
// redials a peer that went away with backoff (0.1 s, growing 1.6 times a
// try up to 2 s); a changed address replaces the connection. HTTP/2 flow
// control windows are fixed at 16 MiB a stream and a connection (the
// ceiling of gRPC's dynamic windows, whose estimate would answer each
// frame of an idle link with a ping and its ack: two more packets and
// wakeups for every heartbeat). Requests flow
// on the sender's own connection, answers come back on the same stream,
// so each direction of a node pair has its connection. Close stops the
// server (and closes its listener) and every connection.
//
// Streams. On each connection, up to three long-lived bidirectional
// streams, opened on first use and again after one breaks (clusterpb's
// Cluster service): control (heartbeats, votes, pre-votes, timeout-now:
// never queued behind appends), data (AppendEntries including the
// pipeline's; node-level calls to a peer without call lanes), snapshot (InstallSnapshot, its data in
// 256 KiB chunks that the receiving Raft reads through a pipe; one slow
// snapshot holds up the others on that stream, never votes or appends).
// Every message carries its group id and a request id (its answer, chunks
// and cancel carry the same id) and the caller's remaining timeout. A
// Send marked Within carries a deadline without a timer of its own: one
// timer per link fails the calls past theirs (and tells the peer to drop
// them); a request's context on the serving node starts its timer only
// once someone waits on it (deadline.go). The forwarded calls, tens of
// thousands a second, so cost no timer each. The
// receiver hands a group's appends on the data stream to Raft in the order
// they came, and runs everything else concurrently, except the calls of a
// method registered with HandleOrdered: their starts run on the stream's
// reader in the order they came (answered whenever and wherever the start
// has its answer called: no goroutine waits for it), so requests a
// node Sends one after another start in that order on the peer; those of a
// method registered with HandleInline run to their answer there, in the
// order they came, with no goroutine started for them (handlers that
// never block). A Send's answer is handed to its done on the caller's
// stream reader: no goroutine waits for it. Once the reader has handed
// over every answer it has read (no whole frame is left in its buffer)
// it runs GRPCNetwork.OnAnswersRead's function, and once more when the
// link ends: what the done callbacks of one read leave to be done
// together is done there, before the reader waits for the peer.
//
// Call lane. Node-level calls (Call, Send) go to each peer over a TCP
// connection of their own, dialled on first use and again after one
// breaks, on the port the gRPC server listens on (mux.go tells them
// apart by their first bytes: the lane's magic, else HTTP/2 or TLS for
// gRPC). The lane carries the same Frames as a stream, each a 4-byte
// length and its protobuf encoding, with the same link (queue, one
// writer, batching) and the same dispatch at the other end (serverLink),
// so its contract is the data stream's; it skips gRPC's machinery: the
// link's writer writes the socket itself (no HTTP/2 writer goroutine) and
// the goroutine that reads the socket dispatches (no hand-off from an
// HTTP/2 reader). Over plain TCP it goes further: a put that finds the
// link's writer idle writes the frame from its own goroutine, with a
// non-blocking write (sockio), and leaves the writer only what the socket
// did not take; reads are sockio's too (no P hand-off, no wake of the
// runtime's monitor thread per system call). On a loaded machine each
// hand-off is a wait for a CPU, and a forwarded publish waits for its
// round trip: the lane cut the forward.publish round trip by 10–20% and
// the brokers' CPU a forwarded message by 0.5–1 µs, its inline writes
// another 0.2 µs (docs/benchmarks.md). The opening: the dialler
// sends the magic, does the TLS handshake over the connection (with
// Config.TLS: mutual, as for gRPC), then its node name and the join
// secret; the listener answers the magic and OK, or refused with gRPC's
// code for it and a reason (a wrong secret, a TLS setting not its own;
// logged once a minute per host), within 10 s. A peer that answers
// anything else (an older node's HTTP/2 SETTINGS) or, with TLS, closes
// the connection during the handshake does not know lanes: calls to it
// go on the data stream, all of them while that stream stands (so Sends
// keep their order), and a lane is tried again once it ended. While the
// gRPC connection is failing, calls fail at once (as the data stream
// did); a refused lane answers calls with its refusal for a second. A
// lane lives no longer than the peer's gRPC connection: any change of
// that connection away from Ready resets the lane, whose calls in flight
// fail with Unavailable (what it had not sent is dropped; what the peer
// read already it still runs, normally long before a successor lane is
// dialled and opened). A frame past MaxMessageBytes or that is not a
// Frame closes a lane.
// Every connection the port accepts, and every lane dialled, has
// TCP_USER_TIMEOUT set to KeepaliveInterval (gRPC sets it only on the
// connections it accepts unwrapped): a black-holed peer's connections end
// within it even while writes wait for acknowledgement.
//
// Framing and batching. A stream's sender has a queue and one writer: the
// writer takes everything queued and sends it as one Frame (a repeated
// Message; a frame is filled to 1 MiB, a bigger message goes alone), and
// what is queued while it sends goes in the next frame. Under load, the
// heartbeats or appends of many groups share a frame (BenchmarkGRPC: about
// 100 messages a frame with 1,000 groups at once, one with a single group).
// A queue holding 4 MiB makes senders wait (a bigger message goes in alone),
// except a request whose context is marked Immediate and an inline
// handler's answer: their senders must not block (a done callback, a
// queue's loop) and bound what they have in flight themselves; such a Send
// to a peer whose stream is not open yet waits for it on a goroutine, with
// the other Immediate Sends behind it, in order, and no longer than its
// context (its done is then told Canceled or DeadlineExceeded). gRPC reads the peers'
// messages into buffers of the Network's own pool (bufpool.go: powers of
// two up to 4 MiB, not cleared at each use as gRPC's default pool's are).
//
// Security. Every call and stream carries the join secret in its metadata;
// the receiver compares it in constant time and refuses a peer without it
// with codes.Unauthenticated before reading anything of it, logging the
// peer's address (once a minute per address). With Config.TLS, connections
// are mutual TLS: the listener requires and verifies a client certificate,
// the dialler verifies the server's against the host of the address it
// dialled. Peer input is bounded (MaxMessageBytes a message, 65,536
// requests under way a stream) and checked before Raft sees it (convert.go:
// known log types, configurations that decode, snapshot version and size);
// a malformed message closes its stream with InvalidArgument and is logged,
// never panics.
//
// Failure signal. Watch reports each peer up when its connection is ready
// and down when it breaks or cannot be made (refused, reset) or when the
// peer falls silent although the connection stands (a hung process, a
// black-holed link). Any frame from the peer counts as hearing from it: an
// answer on this node's streams or a request on the peer's (liveness.go).
// A peer silent for Config.PingInterval (1 s) gets a ping, the node
// heartbeat, on the control stream; one that does not answer within
// Config.PingTimeout (2 s) of when it was last heard from is down, up
// again once it is heard from. So pings flow only between nodes with
// nothing else to say (a Raft leader's heartbeats to its followers and
// their answers stand for them both ways), and of such a pair only the
// node whose name sorts first pings (the other waits half an interval
// longer and hears those pings): an idle cluster sends few. Frames push
// the ping timer back (at most once a quarter interval), so a peer's ping
// goroutine wakes only after a silence, not at each frame's interval. One event per
// node, not per group: the Raft groups start elections in the groups a
// dead node led. gRPC's own keepalive (Config.KeepaliveInterval, 10 s at
// least on the dialling side) closes a connection that stays silent.
//
// # The in-memory twin
//
// InmemHub connects Networks in one process (hub.Network(name) per node).
// Requests and answers are copied as if they crossed a wire; handlers run
// on goroutines of their own; calls and RPCs in flight when their link is
// cut fail with Unavailable. Sent requests go through one queue per link
// (started in order, as over a stream). Fault controls: Partition(a, b)
// cuts one link, Isolate(node) all of a node's links, Heal undoes both;
// SetDelay holds calls up on their way (a slow link: a Sent request holds
// up those Sent after it, Calls may overtake each other); a node goes down
// by closing its Network and restarts by asking the hub for it again. Watch
// reports each change of a peer's reachability.
//
// # Concurrency
//
// Every exported method is safe for concurrent use. No lock is held while a
// handler, a watcher or Raft code runs. Locks are leaves except
// InmemHub.mu → watchers.mu (which only guards a queue), GRPCNetwork.mu
// while it dials, and peerConn.mu while it opens a stream (a call lane is
// dialled on a goroutine of its own, peerConn.lmu held only to start it
// and to record its outcome). Lock chains that
// cross packages are in one list: LOCKS.md at the repository root.
package transport
