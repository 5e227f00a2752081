// Package sockio does the protocol servers' socket reads and inline writes
// on a connection's raw file descriptor, and busy-polls a socket for a
// reply that is known to be on its way.
//
// A Socket's reads and writes are non-blocking system calls made without
// the Go runtime's system-call bookkeeping (on Linux, but for the race
// detector's builds, which need package syscall's): they never block,
// so the goroutine keeps its P, and the runtime's monitor thread is not
// woken for each of them. Waiting for a socket to become readable still
// goes through the runtime's network poller, so read deadlines hold.
//
// Busy-polling trades CPU for latency, within bounds: a read spins only
// while its Socket's wantPoll function says a reply is due (for AMQP: a
// consumer ran out of credit and waits for the client's ack), for at most
// the configured duration, and only while the server's Spinners budget
// has room, so spinning never takes more than its share of the
// processors. A spin that times out reports it (the reply did not come
// promptly) and the Socket blocks as before.
package sockio
