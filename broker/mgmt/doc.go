// Package mgmt serves Warren's HTTP API on 15672 — the subset of RabbitMQ's
// management API that clients and tools use, with RabbitMQ's JSON shapes and
// status codes — and Prometheus metrics on 15692.
//
// Every API request logs in with HTTP basic auth through Broker.Login, the
// rules every listener shares (broker/auth: password, loopback_users, from
// the socket's peer address). Authorization is RabbitMQ's: Routes is the one
// table of routes, each with the least tag it needs (management,
// policymaker, monitoring, administrator) and where its vhost comes from; a
// route with a vhost in its path needs access to it (a permission entry)
// unless the caller is an administrator. What a handler then does in the
// vhost is checked against the caller's permission patterns as AMQP checks
// them (Server.access: configure to declare and delete, write and read to
// bind, read to purge and get, write to publish, write on a new queue's
// dead-letter or a new exchange's alternate exchange), administrators
// included. Lists show the vhosts the caller has access to (all for an
// administrator), and connections and channels are the caller's own unless
// the route's Others tag is theirs. A refusal is 401 not_authorised.
// A node with a fault only a restart clears (Broker.Fault: its metadata
// down after a failed reset, so no user table) answers credentials it
// cannot check with 503 and the fault's reason, not 401, and so do its
// probes: /readyz, /healthz and the health checks.
// Vhost names are URL path segments, so "/" is written %2F. Errors are
// {"error": ..., "reason": ...}.
//
// The cluster: /api/overview and the lists of queues, connections,
// channels and consumers (and their per-vhost and per-user variants) show
// every member's objects, each naming its node (cluster_view.go). The
// answering node asks each other running member for its local items with
// one node-level call (Cluster.CallNode, method "mgmt.items"), all at once,
// each bounded by 2 s; a member that does not answer is left out and the
// answer still comes. Members send their items uncut, each with its user
// and vhost; the authorization cut is the answering node's, as above. A
// queue's figures come from the node that holds it (meta.Queue.Node); a
// queue whose node does not answer is listed from the metadata with state
// "down". DELETE /api/connections/{name} closes the connection on its node
// ("mgmt.close_connection"), after the same check. A cluster of one makes
// no call. cluster_name is the least member name in the metadata (the
// first node's, by default), the same on every node.
//
// A definitions import (POST /api/definitions) is all or nothing: the
// whole document is checked against the broker and itself first, and a
// document with an item that would be refused changes nothing; the 400
// names the item (section, index, name).
//
// Metrics: Warren's own warren_* families on /metrics, and RabbitMQ's
// rabbitmq_prometheus families (rabbitmq_identity_info, rabbitmq_global_*,
// churn, node resources, rabbitmq_queue_*) with RabbitMQ's names, labels and
// endpoints: /metrics (queues aggregated), /metrics/per-object and
// /metrics/detailed?family=...&vhost=... (metrics_rabbitmq.go). All are read
// at scrape time from the broker's counters (amqp.Counters,
// stream.Counters, counters.Churn); nothing is counted twice.
//
// Serve runs an HTTP listener within ListenerLimits: read-header, read,
// write and idle timeouts and a cap on open connections (one more is
// answered 503 and closed), so HTTP clients cannot hold the descriptors the
// AMQP and stream listeners share.
//
// The package reads and changes the broker only through the Broker interface,
// so it has no state of its own beyond its HTTP handlers.
package mgmt
