// Package logstore is the node-wide Raft log store: every Raft group on a
// node (the metadata group, one per quorum queue, one per stream) keeps its
// log entries and its stable values (currentTerm, lastVote...) here, in one
// sequence of segment files written by one goroutine. Store.Group(id)
// returns a group's hashicorp/raft LogStore and StableStore (*Group).
// Nothing in the broker uses it yet; the cluster layer takes the small
// GroupStores interface (Group, Drop), with Inmem (raft.InmemStore per
// group) as the in-memory twin for fast tests.
//
// # Group commit
//
// StoreLogs, DeleteRange and Set of any group queue a request to the
// writer and wait. The writer takes whatever is queued from all groups (up
// to 4096 requests), encodes it into one buffer, writes it to the head
// segment with one write and one fdatasync, updates the in-memory index and
// answers every waiter. While it syncs, the next batch accumulates, so the
// fdatasyncs per second stay near what the disk does, whatever the number
// of groups (see "Benchmarks").
//
// # File format
//
// dir holds segments named by a 16-hex-digit sequence number,
// 0000000000000001.wlog, ... A segment starts with the 8 bytes "WRNRAFT1",
// then records, all integers little-endian:
//
//	[len u32][crc32c u32] body (len bytes; the CRC, Castagnoli, covers the body)
//	body: [kind u8][group id length u16][group id]
//	  kind 1 log:    [index u64][term u64][type u8][appendedAt unix ns i64]
//	                 [data length u32][data][extensions length u32][extensions]
//	  kind 2 delete: [min u64][max u64]           DeleteRange(min, max)
//	  kind 3 stable: [key length u16][key][value] (the value runs to the end)
//	  kind 4 move:   as kind 1: a live entry copied out of the oldest segment
//	  kind 5 drop:   nothing more: the group's entries and stable values are gone
//
// The kind byte's high bit (0x80) marks the last record of a batch (one
// write). A new segment is started when the head has reached
// Options.SegmentBytes (default 64 MiB); a batch is never split across
// segments.
//
// # The index and compaction
//
// Each group's live entries are contiguous (the store is a
// raft.MonotonicLogStore: StoreLogs must continue at LastIndex()+1, or
// start anywhere on an empty group), so the in-memory index is, per group,
// the first index and a slice of (segment, offset, length); GetLog reads
// the record with one pread and checks its CRC. DeleteRange may remove a
// prefix (compaction after a snapshot), a suffix (conflict truncation) or
// everything; a range strictly inside the log is ErrHole. Stable values
// live in memory too. Memory: 24 bytes per live entry.
//
// Compaction removes whole segments, oldest first, never rewriting one in
// place. After each batch the writer looks at the oldest segment: once its
// live entries (of any group) take at most a quarter of it, they are copied
// forward to the head as move records (kind 4, the body of a log record),
// its current stable values are written again, and the file is removed.
// So an idle group's few entries (raft compacts only after
// SnapshotThreshold entries) do not pin the disk, and a mostly live
// segment is not copied. Only a prefix of the segment sequence is ever
// removed, so a delete record never goes before the entries it deleted.
// Recovery treats each group's entries as a set (a log or move record sets
// an index, a delete record removes its range, a drop record empties it;
// last writer wins), because
// moved entries arrive below a group's first index and out of order; each
// group's set must come out contiguous, or Open fails with ErrCorrupt.
// Store.Drop removes a deleted queue's or stream's group (a drop record:
// its entries and stable values are dead from then on).
//
// # Durability contract
//
// StoreLog, StoreLogs, DeleteRange, Set, SetUint64 and Store.Drop return nil only after
// their records are written and fdatasynced; a new segment file and its
// directory entry are synced before records go into it. After a failed
// write or fdatasync the store refuses every later write (what reached the
// disk is unknown; the next Open decides); reads of what was indexed go on.
//
// # Recovery
//
// Open scans the segments in order, checks every record's CRC and
// rebuilds the index (see above). A bad record (short,
// impossible length, CRC mismatch, malformed body) in the last segment
// that is followed by at most one intact commit-marked record is a torn
// final batch: the file is cut there and a warning logged with the file,
// offset and bytes cut. A bad record anywhere else, with complete batches
// after it, is damage to acknowledged entries: Open fails with ErrCorrupt
// naming the file and offset (Raft must not silently lose committed
// entries; the node's log is restored from a peer). Caveat: damage inside
// the final batch, or to the last record of the batch before it, cannot be
// told from a torn write (pages of one unsynced write may reach the disk in
// any order) and is cut with the warning.
// Open reads each segment whole once (up to SegmentBytes of memory).
// The directory must be used by one Store at a time (the broker's data
// directory lock covers it).
//
// # Concurrency contract and lock order
//
// Every method is safe for concurrent use. Writes of one group are
// serialized by Group.wmu, held from the check of the request until its
// answer (raft issues them from one goroutine anyway); reads never wait
// for a write's fdatasync. Lock order: Group.wmu, then Store.mu (an
// RWMutex over the index and the segment list). The writer goroutine takes
// Store.mu only to apply a synced batch and to add or remove a segment,
// never across a write or fdatasync, and never takes Group.wmu.
//
// # Benchmarks
//
// BenchmarkAppend: 1, 10 and 1,000 groups append concurrently, each one
// 256-byte entry per StoreLogs call (as raft does), real fdatasync:
//
//	go test -run '^$' -bench BenchmarkAppend -benchtime 3s ./broker/cluster/logstore/
//
// Measured 2026-11-24 on this project's build machine (2 vCPUs shared with
// other jobs, virtio disk, ext4; figures vary with the disk's sync latency):
//
//	groups   appends/s   fsyncs/s   appends per fsync
//	1            1,827      1,827      1.0
//	10           6,367      1,289      4.9
//	1000       223,107        458    488
//
// A second run (after Drop and moves were added) gave 1,668, 8,234 and
// 193,222 appends/s: the figures move by 10-30% with the other jobs on
// the machine.
//
// One group is bound by one fdatasync per append (~0.55 ms here). With
// more groups each fdatasync serves every group that queued meanwhile, so
// the append rate grows with the number of groups while the fsync rate
// stays at or below the disk's; a store per group would need one fsync per
// append per group. With 10 groups about half of them catch each batch:
// a group re-queues only after its answer, while the writer starts the
// next batch at once.
//
// # Bad input
//
// Group ids are 1 to 65535 bytes (ErrGroupID); a record's length above
// MaxRecordBytes (256 MiB) is corruption, never an allocation; the record
// decoder is fuzzed (FuzzDecodeRecord), and so is recovery of arbitrary
// segment bytes (FuzzOpenSegment).
package logstore
