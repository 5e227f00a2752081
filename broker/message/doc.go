// Package message defines the broker's in-flight message: what a channel
// publishes, what queues hold and deliver, and its compact on-disk encoding.
//
// A Message is immutable once published: queues share one *Message between
// them (fanout) and never modify it; dead-lettering makes a copy with new
// properties. Props holds the AMQP content-header property bytes exactly as
// the publisher sent them (flags and values), so a delivery forwards them
// without re-encoding. FieldInt reads a header or argument number whatever
// integer width it came in, the one comparison routing, queue arguments and
// consumers share. The package knows nothing of sockets or storage.
package message
