// Package mgmt serves Warren's HTTP API on 15672 — the subset of RabbitMQ's
// management API that clients and tools use, with RabbitMQ's JSON shapes and
// status codes — and Prometheus metrics on 15692.
//
// Every API request is authenticated with HTTP basic auth against the broker's
// users: reads need the management, monitoring, policymaker or administrator
// tag; changes to users, vhosts, permissions, definitions and policies need
// administrator (policies: policymaker too). Getting messages from a queue
// and publishing through an exchange also need the user's read or write
// permission in that vhost, as over AMQP. Vhost names are URL path
// segments, so "/" is written %2F. Errors are {"error": ..., "reason": ...}.
//
// The package reads and changes the broker only through the Broker interface,
// so it has no state of its own beyond its HTTP handlers.
package mgmt
