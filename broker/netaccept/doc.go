// Package netaccept is the accept loop the protocol servers (AMQP, stream)
// share: it serves a listener until its context ends, closes the listener
// then, retries after temporary accept errors, and hands every connection
// to the server, which owns it from then on.
package netaccept
