// Package brokerapi is the operator's client of a Warren node's HTTP API
// (docs/http-api.md): the vhost calls through which per-vhost storage
// policies reach a running cluster without a restart, and the cluster calls
// (status, decommission, forget) through which the operator reads the
// cluster's health and shrinks it. It speaks JSON over HTTP with basic auth
// and knows nothing of Kubernetes. A Client is safe for concurrent use;
// every call takes a context and honours its deadline.
package brokerapi
