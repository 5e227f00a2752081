// Package netaccept is what the protocol servers (AMQP, stream) share of
// their listeners: Listen opens a TCP listener whose connections use a
// bounded segment size (each protocol's ListenMSS), and Serve is the accept
// loop: it serves a listener until its context ends, closes the listener
// then, retries after temporary accept errors, and hands every connection
// to the server, which owns it from then on. Limit bounds how many
// connections a listener holds open at once (the HTTP listeners use it, so
// a flood of them cannot take the file descriptors AMQP and stream share).
package netaccept
