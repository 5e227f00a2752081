// Package streamlog is the on-disk log of one stream, laid out as
// RabbitMQ's osiris log so that a chunk read from disk goes to a
// stream-protocol consumer unchanged. It knows nothing of sockets or
// protocols: messages are opaque bytes (AMQP 1.0 encoded by the clients).
//
// Files, in the stream's directory, named by the first chunk id they hold
// (20 decimal digits):
//
//	NNNNNNNNNNNNNNNNNNNN.segment  "OSIL" version(4)=1, then chunks
//	NNNNNNNNNNNNNNNNNNNN.index    "OSII" version(4)=1, then one 29-byte
//	                              record per chunk: chunk id(8)
//	                              timestamp(8) epoch(8) position(4) type(1)
//
// A chunk is a 48-byte header (see Header: magic/version 0x51, type, num
// entries, num records, timestamp, epoch, chunk id, CRC-32 (IEEE) of the
// data, data length, trailer length, bloom size, reserved), the bloom
// filter (present when messages carry filter values, see bloom.go), the
// data and the trailer. The only departure
// from osiris: the 3 reserved bytes, which osiris leaves zero and clients
// skip, hold a 24-bit CRC-32C of the rest of the header and of the
// trailer, which osiris's data CRC leaves unprotected; recovery checks it. Data entries are
// simple (size(4) with the high bit clear, then the message) or sub-batches
// (flag|compression(1), records(2), uncompressed length(4), length(4),
// then size-prefixed records, possibly compressed). A chunk's id is the
// offset of its first record; the next chunk's id is id + num records.
//
// Chunk types: user (0) carries messages, and in its trailer the last
// publishing id of each named publisher in it (publisher de-duplication);
// tracking delta (1) carries consumer offsets (store offset); tracking
// snapshot (2) opens every rolled segment with the whole tracking state
// (even when empty), so retention never loses it and recovery reads no
// further back than the last segment. Tracking records are osiris's:
// type(1) ref length(1) ref, then chunk id(8) and sequence(8) for
// publishers (type 0) or offset(8) for consumers (type 1). A delta holds
// one record count, so it takes one offset and chunk ids stay unique
// (consumers may see gaps in offsets, as with RabbitMQ); a snapshot holds
// none and shares its id with the chunk after it, so rolling a segment
// leaves no gap.
//
// Writing: a Batch collects what one or several publishers sent in one
// write interval; Log.Append writes it as one chunk with one write
// syscall (and its index record is written by the syncer with the others
// of the round). Durability is asynchronous: the syncer goroutine fsyncs
// (group commit: one fdatasync serves every chunk appended meanwhile),
// advances the commit point, wakes the readers and calls each Append's
// DoneFunc — that is when publish confirms may go out. Readers see only
// durable chunks, so an offset handed to a consumer is never reused after
// a crash.
//
// Reading: Log.NewReader positions a Reader by an OffsetSpec (first, last,
// next, absolute offset, timestamp; via the index files, by binary search).
// Reader.Next yields whole chunks as stored, waiting at the tail on a
// channel closed at each commit (no polling). With read-ahead on (a
// ReadAhead setting, shared and changeable at runtime), a read at a chunk
// boundary fetches limit bytes: a chunk smaller than the limit, and the
// chunks after it within the limit, are served from memory with no more
// syscalls; chunks at or above the limit are not read ahead and, with
// ReaderOptions.FileSections, are handed out as (file, offset, length)
// for sendfile. With read-ahead off a chunk costs a header read plus its
// data (read, or sendfile). Chunk.Entries iterates records with their
// offsets (AMQP consumers of streams).
//
// Replication: Log.AppendChunks appends chunks exactly as another log's
// Append built them (validated, in offset order), so replicas of a stream
// hold the same chunks — ids, timestamps, CRCs — while each writes its own
// segments and snapshots; a reader with ReaderOptions.Tracking yields the
// chunks to ship, tracking chunks included.
//
// Retention (MaxBytes, MaxAge) removes whole segments, oldest first,
// never the active one; it runs at every roll, on ApplyRetention and, with
// MaxAge, on a timer (a tenth of MaxAge, between 1 s and 1 min).
// Readers that still hold a removed file finish it; new reads start at
// the first remaining segment.
//
// Recovery (Open): sealed segments are trusted if their index agrees with
// them (the last record points at the chunk that ends the file and leads
// to the next segment) — they were fdatasynced before the next segment was
// started — and re-indexed by a scan otherwise. The active segment is
// scanned chunk by chunk (header, CRC of the data, entry structure, chain
// of chunk ids) and cut after its last valid chunk; its index is rewritten.
// A chunk confirmed durable was fsynced whole, so it always survives; a
// torn chunk was never confirmed nor read. Tracking state is replayed from
// the last segment that opens with a snapshot.
//
// Every repair recovery makes (a cut tail, a re-indexed or cut sealed
// segment, an empty segment left by a roll) is logged at warn with the file
// and the bytes dropped (Options.Log).
//
// A full disk: an Append whose write fails is cut back and fails alone; a
// roll that cannot create or write its new segment removes it and changes
// nothing (the next Append tries again); index records the syncer cannot
// write are dropped (the index is cut back to whole records and rebuilt at
// the next start) rather than failing chunks whose data is written. Only a
// failed fsync stops the log for good: after it nothing is known to be on
// disk. Writes are reported to Options.Disk for the disk alarm.
//
// A Log holds an flock on its directory's "lock" file: a second Open of
// the same directory fails instead of corrupting it.
//
// Concurrency: Log is safe for concurrent use (appends serialize on its
// mutex; the write syscall happens under it). A Reader and a Batch belong
// to one goroutine each. DoneFuncs run on the syncer goroutine, never under
// a lock of this package. Lock order: Log.mu, then Options.Disk's locks
// (store.DiskWatch: its notify lock, then the disk alarm's callback).
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package streamlog
