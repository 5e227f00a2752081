// Package store holds the on-disk formats of classic queues: each queue's
// index (version 2, with version 1's segment size as its variant) and the
// per-vhost message store that keeps large messages once for any number of
// queues. It knows nothing of AMQP: a message is opaque bytes with a MsgID.
//
// It also owns the data directory's layout (layout.go): VhostDir, StreamDir
// and the queue directories, every client-chosen name made one component by
// pathname.Escape (injective, never "." or "..", no separator, at most 200
// bytes). MigrateLayout, run once at start before any vhost opens, moves a
// directory of the previous layout (names escaped by three different, unsafe
// rules) to the new names, crash-safely (see migrate.go), and records
// LayoutVersion in <data_dir>/format.
//
// Queue index (per queue directory): segment files of fixed-size 32-byte
// entries, segment n covering seqs [n*E, (n+1)*E), entry i at offset i*32:
//
//	status(1) flags(1) reserved(2) crc32c(4) seq(8) msgid(8) offset(4) size(4)
//
// status is 0 empty, 1 published, 2 acked, 3 delivered (published, and
// handed to a consumer: the queue marks deliveries as they happen, so after
// a crash only the messages that reached a consumer come back redelivered,
// as with RabbitMQ's classic queues). Messages below the embed
// threshold are appended to the segment's body file (.qs) at offset; larger
// ones live in the message store under msgid. The CRC covers the entry
// fields after it and the body, so a torn entry or body is never served.
// Acks rewrite the status byte in place. A segment whose entries are all
// acked is deleted. Recovery scans the segments: published (or delivered)
// persistent entries with a valid CRC are live; transient entries are dropped.
//
// Version 2 writes entries straight into the segments (4096 entries each).
// Version 1 (segments of 16384 entries) first appends publishes and their
// embedded bodies to a per-queue journal and moves them into the segments
// when the journal fills or the queue closes; recovery replays the journal on
// top of the segments (see journal.go). Conversion between the two rewrites a
// queue's files beside the old ones and swaps them (see convert.go).
//
// Message store (per vhost): append-only files of records
// len(4) crc32c(4) msgid(8) data, an in-memory map msgid -> location and
// reference count (rebuilt at recovery from the files and the queue indexes),
// and compaction of files whose live bytes fall below half. Recovery skips
// a record whose CRC fails when its length leads on to a good record, so a
// flipped byte costs that one message; where the framing is lost (a length
// past the end, more than 16 bad records in a row) the file is cut after
// its last good record (see msgstore_recover.go).
//
// Every repair recovery makes — a queue entry dropped for its CRC or for
// a message missing from the message store, a torn segment or journal
// tail, a skipped or cut message store record — is logged at warn with the
// file and what was dropped (VhostConfig.Log). Transient entries dropped
// at a restart are not repairs.
//
// Durability: Append hands the batch to the OS before it returns (one
// pwrite per file it touches: the message store is not buffered across
// calls); Ack only rewrites status bytes. Sync (group commit) fsyncs every
// file written before the call, batching many queues' requests into one
// round of fsyncs on the vhost's syncer goroutine; confirms wait for it.
// Opening a new queue costs no fsync: its options file (the layout
// version) is written and fsynced only before the queue's first segment
// or journal file is made, so a declare (made durable by the metadata)
// does not wait for the disk twice, and no file of the queue exists in a
// layout a crash could lose.
//
// A full disk is an expected condition. Append is all or nothing: when a
// write fails (ENOSPC) the message store cuts its file back and forgets
// the batch's records and references, the segment buffers are dropped, the
// bodies cut back and any entry that reached a segment file emptied, the
// journal cut back; nothing of the batch is read or recovered, no error is
// left behind, and the next Append writes where the failed one would have.
// Writers tell the DiskWatch (diskwatch.go) what they are about to write
// (Reserve: an atomic add against an estimate of the free space, with a
// statfs only when the estimate crosses the limit) and about ENOSPC
// (NoSpace), so the disk alarm is raised before the disk fills and at once
// when it does.
//
// Concurrency: a QueueIndex belongs to its queue's goroutine (Sync may be
// called from it and completes on the syncer). MessageStore, VhostStore and
// DiskWatch are safe for concurrent use. Lock order: VhostStore.mu, then
// MessageStore.mu, then DiskWatch.notifyMu, then whatever the alarm
// callback takes (the server's alarm locks, the protocol servers' locks,
// connection output locks); writers call the DiskWatch with no other lock
// of this package held except MessageStore.mu during compaction.
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package store
