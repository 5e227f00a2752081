// Package amqp10 is the AMQP 1.0 message format as far as streams need it:
// stream-protocol clients publish and read AMQP 1.0 encoded messages, and
// AMQP 0.9.1 clients publish to and consume from the same streams. It
// encodes an AMQP 0.9.1 message (properties, exchange, routing key, body)
// as AMQP 1.0 sections (header, message annotations, properties,
// application properties, one data section), and decodes any AMQP 1.0
// message back into AMQP 0.9.1 properties and a body. The mapping follows
// RabbitMQ's: durable <-> delivery mode 2, creation-time <-> timestamp,
// application properties <-> headers, x-exchange and x-routing-key
// annotations; 0.9.1 properties without an AMQP 1.0 counterpart travel
// as x-basic-* annotations. It is a codec: it knows nothing of queues or
// sockets, and it never panics on malformed input.
package amqp10
