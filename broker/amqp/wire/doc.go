// Package wire is Warren's AMQP 0.9.1 codec: frames, methods, content
// headers, basic properties and field tables, as RabbitMQ speaks them.
//
// It knows nothing of connections, channels or queues; broker/amqp builds
// the protocol state machine on top of it.
//
// # Generated methods
//
// spec_gen.go is generated from spec/amqp0-9-1.stripped.extended.xml (the
// RabbitMQ-extended 0.9.1 spec: confirms, basic.nack, exchange bindings,
// connection.blocked) by ./internal/gen; run `make generate` (or
// `go generate ./broker/amqp/wire`) after changing the XML or the
// generator. Every method is a struct named Class+Method in CamelCase
// (BasicPublish, QueueDeclareOk, ...) whose fields are the XML field names
// in CamelCase (RoutingKey, NoWait, Reserved1, ...). Domain types map to
// Go types: bit→bool, octet→uint8, short→uint16, long→uint32,
// longlong→uint64, shortstr/longstr→string, timestamp→uint64, table→Table.
// Consecutive bits pack into one octet, least significant bit first.
//
// # Reading
//
// Reader is a buffered frame reader: ReadFrame returns a Frame whose Payload
// aliases the reader's buffer and stays valid only until the next call. In
// steady state it does not allocate. Frames larger than the limit set with
// SetMaxFrameSize fail with ErrFrameTooLarge before their payload is read.
// DecodeMethod, DecodeTable and DecodeProperties copy what they return, so
// decoded values outlive the frame.
//
// # Writing
//
// Append* functions append encoded frames to a caller-owned slice, so a
// connection can batch many frames into one write. A content header's
// property list travels as raw bytes (ContentHeader.Properties), which lets
// the broker forward a publisher's properties to consumers unchanged; the
// PropertiesDeliveryMode, PropertiesPriority, PropertiesExpiration and
// PropertiesUserID fast paths read single properties without decoding the
// rest.
//
// # Hostile input
//
// Decoders never panic. Every length is checked against the remaining bytes
// before anything is allocated, and tables and arrays nest at most
// MaxNestingDepth levels deep (deeper input fails with ErrTooDeep).
// DecodeContentHeader checks the headers table with CheckTable, which
// accepts exactly what DecodeTable decodes without building it, so a
// content header accepted on publish always decodes later. A content
// header's body size is a uint64 from the client: the caller bounds it. Encoders never fail: a short string longer
// than 255 bytes is truncated, and a table value of an unsupported Go type
// is encoded as void ('V').
//
// # Concurrency
//
// A Reader belongs to one goroutine. Everything else is pure functions over
// their arguments; there is no package-level mutable state.
package wire

//go:generate go run ./internal/gen -spec spec/amqp0-9-1.stripped.extended.xml -out spec_gen.go
