// Package netaccept is what the protocol servers (AMQP, stream) share of
// their listeners: Listen opens a TCP listener whose connections use a
// bounded segment size (each protocol's ListenMSS), and Serve is the accept
// loop: it serves a listener until its context ends, closes the listener
// then, retries after temporary accept errors, and hands every connection
// to the server, which owns it from then on. Suspend is the body of a
// server's Suspend: refuse new connections, close those open and wait,
// bounded by a context, until they are gone. Limit bounds how many
// connections a listener holds open at once (the HTTP listeners use it, so
// a flood of them cannot take the file descriptors AMQP and stream share).
package netaccept
