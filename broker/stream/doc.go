// Package stream is Warren's RabbitMQ stream protocol server (port 5552):
// the connection state machine, publishing into streams and delivering
// from them, on top of the codec in the proto subpackage and the stream
// log in broker/store/streamlog. It works with the unmodified official
// clients (rabbitmq-stream-go-client, the Java stream client).
// ServeTLS serves the same protocol behind crypto/tls (port 5551): chunks
// are then copied through TLS instead of sendfile, and metadata on a TLS
// connection advertises the TLS port, so clients that follow it (the Go
// client's producers and consumers) stay on TLS.
//
// Streams are queues of type stream in a vhost (queue.Stream, created by
// create stream or by an AMQP queue.declare with x-queue-type stream):
// durable metadata in broker/meta, so they survive restart, and one log
// directory each. The server keeps per-stream state (streamState) shared
// by its connections: the batch being filled, de-duplication sequences,
// single-active-consumer groups, and the connections to tell (metadata
// update) when the stream is deleted, whoever deletes it.
//
// Connection: a reader goroutine decodes frames and runs commands in
// order; a writer goroutine (output) drains the connection's output
// buffer with one write per batch, flushing when the buffer runs dry. The
// handshake is peer properties, SASL (PLAIN against broker/meta's users),
// tune (frame max and heartbeat: the smaller non-zero value), open (vhost
// and permissions); every other command needs an open connection. Where
// clients differ from the protocol document, the server reads what
// RabbitMQ reads: the client's tune with or without the response bit
// (rstream and the Node client send 0x0014), a consumer update response
// with an offset value after a type that takes none (rstream).
// Permissions follow RabbitMQ: configure to create or delete streams and
// super streams, write to declare a publisher, read to subscribe, store
// and query offsets and publisher sequences.
//
// Publishing: publish frames are decoded without allocation and their
// entries (simple messages and sub-entry batches, unchanged) added to the
// stream's batch; the batch is appended as one chunk when the publishing
// connection's socket runs dry (no whole frame left in its read buffer) or
// the batch reaches 4096 entries or 1 MiB,
// so one chunk aggregates what every publisher sent meanwhile. Append does
// not wait for the disk: the log's group commit calls back once the chunk
// is fsynced, and only then do publish confirms go out, one frame per
// publisher per chunk carrying all its publishing ids. A publisher with a
// reference is de-duplicated: a publishing id at or below the last one
// accepted for that reference on that stream is confirmed without being
// stored again. The last id goes into the chunk's trailer (osiris tracking),
// so query publisher sequence and de-duplication survive restarts.
//
// Consuming: each subscription has a delivery goroutine with a log reader
// (offset specs first, last, next, offset, timestamp; the vhost's
// read-ahead setting). It sends one chunk per credit, header and data as
// stored (deliver v1, or v2 with the committed chunk id once the client
// has exchanged command versions saying it takes v2), and waits while the
// connection's output holds more than 4 MiB. Clients skip records before
// the offset they asked for, as with RabbitMQ. Stored offsets are tracking
// records in the stream (store offset has no response; query offset
// answers no-offset until one is stored).
//
// Single active consumer: subscriptions with single-active-consumer=true
// and the same name on a stream form a group; one is active (the first,
// or for a super stream partition the member at partition index modulo
// group size). It is told with consumer update and starts delivering from
// the offset its client answers; when it leaves, or the group changes its
// choice, the previous one is told it is inactive and the next one active.
//
// Super streams are a direct exchange with argument x-super-stream bound
// to each partition stream with its binding key and
// x-stream-partition-order, as RabbitMQ declares them; route resolves a
// routing key through the exchange, partitions lists bindings in order.
//
// Filtering (publish v2, subscribe properties filter.N and
// match-unfiltered): messages with a filter value put it in their chunk's
// bloom filter, and a filtering subscription's reader skips chunks that
// cannot hold a wanted value; the client filters the messages of the
// chunks it gets, as with RabbitMQ.
//
// A stream lives on one member of the cluster, without replicas yet:
// metadata names that member as its leader by the host and port it
// advertises (stream.advertised_*, else its listener's; asked over the
// cluster link, cluster.go), and the other members answer a publisher's
// or consumer's declaration for it with stream-not-available, so clients
// connect where metadata points, as they do with RabbitMQ.
//
// Deleting a vhost closes the stream connections open on it (code
// virtual host access failure); deleting a stream, by any protocol, sends
// its publishers' and consumers' connections a metadata update and drops
// them.
//
// Bad input: a malformed frame, a frame over the negotiated maximum or a
// command out of place gets a close with the protocol's code (unknown
// frame, frame too large) and ends that connection only; an unknown
// command that carries a correlation id is answered with unknown frame and
// the connection stays open. Decoding never panics (FuzzDecode). Until
// open succeeds frames are bounded by Config.InitialFrameMax (8192, as
// RabbitMQ's stream.initial_frame_max), and a connection's read buffer
// (proto.Reader) starts at 4 KiB and grows only with bytes that arrive,
// never with the size a frame declares; its output buffers grow with what
// is sent. An unauthenticated connection holds a few KiB of heap. A panic
// on a connection's reader, which would be a bug, is recovered, logged at
// error and closes only that connection (code internal error).
//
// Lock order: streamState.mu, then conn.mu, then output.mu; subscription.mu
// is taken alone; the log's mutex is a leaf. Durability callbacks run on
// the log's syncer goroutine and only append to outputs.
//
// Large chunks (512 KiB or more, sendfileMin) that the reader did not read
// ahead go to the socket with sendfile: the header through the output
// buffer, the data spliced in by the writer, up to sectionsMax of them in
// flight while the delivery goroutine reads on (the reader waits for them
// before it closes their segment file). Mid-size ones are read into memory
// by the reader (one pread for the part read-ahead did not bring).
//
// The listener asks for a TCP MSS of 8 KiB (ListenMSS): on loopback the
// Go client's default 8 KiB socket buffers otherwise stall every window
// (silly-window avoidance, delayed ACKs) down to a few thousand messages
// per second.
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package stream
