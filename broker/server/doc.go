// Package server assembles one Warren node: it opens the metadata store,
// bootstraps the default vhost and user on first start, runs a vhost runtime
// per vhost, and serves AMQP, the stream protocol, the HTTP API and metrics.
//
// One node per data directory: New takes an exclusive flock on
// <data_dir>/lock (pid, host and node name written inside) before it reads
// anything, and a second node on the directory fails with ErrDataDirInUse
// naming the holder; the kernel drops the lock when the process exits,
// kill -9 included. Shutdown releases it last.
//
// Startup order: lock, meta, the transient queues (and, one node being the
// whole cluster, exchanges) a crash or kill left in meta dropped
// (vhost.DropTransient; a renamed lone node's queues were adopted when it
// joined: forgetStaleNames), the data directory's layout migration
// (store.MigrateLayout, from the durable queues meta lists), vhosts (queues
// recover their messages), then listeners, so no client sees a
// half-recovered node.
//
// The node follows the metadata: onMetaEvent starts a vhost when it is
// put and stops it (files removed) when it is deleted, before the write
// returns, and on a Reset starts and stops vhosts to match the new state;
// each vhost follows its own exchanges, queues and bindings.
// Policy changes convert queue storage in the background (Shutdown waits). Shutdown runs in reverse: stop
// accepting, close client connections (in-flight publishes finish), close
// vhosts (queues flush and fsync, recording a clean shutdown), close meta.
//
// TLS: amqp.tls_listen and stream.tls_listen open more TCP listeners whose
// connections go through crypto/tls to the same AMQP and stream servers.
// A *tls.Conn is not a syscall.Conn, so the AMQP connection's inline
// RawConn write path is off for it and its writes go through the writer
// goroutine (and thus through TLS).
//
// Resource alarms (alarms.go): memory and disk are sampled every second;
// the disk alarm is also raised between samples by the storage writers
// through one store.DiskWatch on the data directory — when what they are
// about to write would take the free space below limits.disk_free_limit,
// and at once when a write fails with ENOSPC — and cleared only by a
// sample that finds the space back. Alarm changes reach the AMQP and
// stream servers in order under blockMu. Lock order: DiskWatch's notify
// lock, then Broker.blockMu, then Broker.alarmMu, then the protocol
// servers' locks (amqp.Server.unblockMu, its mu, each conn's output lock).
//
// A member that goes down takes its transient queues with it, as RabbitMQ's
// on_node_down: once the transport has reported it down for downGrace
// (5 s), and while it still is, the metadata leader deletes the records of
// the queues it held that vhost.Transient reports (non-durable or
// exclusive) and of the exclusive queues whose connection was on it
// (cluster_down.go); durable queues stay, unavailable until it is back. A
// node without a metadata leader for as long closes its connections that
// own exclusive queues, as the other side deletes them
// (cluster_leaderless.go).
//
// Message ids are node-unique across restarts: the counter starts at the boot
// time in nanoseconds, so ids handed out after a restart exceed every stored one.
//
// Lock chains that cross packages are in one list: LOCKS.md at the repository root.
package server
