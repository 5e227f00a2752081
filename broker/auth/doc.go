// Package auth decides whether a login is accepted, the same way for every
// listener: AMQP (plain and TLS), the stream protocol (plain and TLS) and the
// HTTP API all log in through Checker.Login, so a rule added here holds on
// each of them.
//
// A login needs the user's password, checked against the metadata store
// (meta.User.CheckPassword), and, for the users named in auth.loopback_users
// (guest by default, as RabbitMQ's loopback_users), a connection from a
// loopback address: 127.0.0.0/8, ::1, an IPv4-mapped loopback address, or a
// Unix socket. The peer address is the socket's, never a header a client
// could set. A refused login wraps ErrRefused; one refused only because of
// where it came from also wraps ErrLoopbackOnly, so a protocol can answer
// with its own code for it (the stream protocol's
// sasl_authentication_failure_loopback, HTTP's "User can only log in via
// localhost"). A wrong password wraps ErrWrongPassword and an unknown user
// ErrUnknownUser: the listeners log the reason (at info, with the peer's
// address, in RabbitMQ's words: "PLAIN login refused: user 'x' - invalid
// credentials (no such user)") but tell the client only that the login was
// refused, so a client cannot learn which users exist.
//
// Checker holds no mutable state and is safe for concurrent use.
package auth
