// Package proto is the codec of the RabbitMQ stream protocol (the protocol of
// port 5552, deps/rabbitmq_stream/docs/PROTOCOL.adoc in rabbitmq-server): the
// frame layout, the command keys and response codes, and one Go type per
// command with its encoder and decoder. It is pure: no I/O beyond reading
// frames (Reader, or ReadFrame from a bufio.Reader), no knowledge of streams
// or connections. Both readers check a frame's declared size against their
// maximum before reading it, and grow their buffers with the bytes that
// arrive, never ahead of them (FuzzReader).
//
// A frame is a big-endian uint32 size followed by size bytes: key (uint16),
// version (uint16), then the command's fields. Responses carry the request's
// key with the high bit set (0x8000). Every key is unambiguous once that bit
// is taken into account, so one Decode serves both directions.
//
// Decode never panics on input: a short or inconsistent frame yields an error
// wrapping ErrMalformed, an unknown key ErrUnknownCommand. Decoded byte slices
// (message bodies, chunks, SASL data) alias the frame buffer; copy them to keep
// them past the next read. The publish and deliver hot paths have their own
// allocation-free entry points (DecodePublish, AppendDeliverHeader).
package proto
