// Package client is a small stream protocol client built on the codec
// (broker/stream/proto), for Warren's load tool and tests: connect and
// authenticate, create and delete streams, publish frames of entries as
// given (so a caller controls chunk sizes), subscribe and receive raw
// deliver frames with manual credit. It does not decode messages beyond
// counting a chunk's records; applications use the official clients.
//
// A Conn has one reader goroutine: it answers requests by correlation id
// and hands confirms, publish errors and deliveries to the callbacks set
// in Options, which run on that goroutine and must not block for long.
// Writes are serialized and flushed per call.
package client
