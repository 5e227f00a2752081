package mgmt

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Cluster is the node's cluster as the API shows and changes it (the
// server implements it over broker/cluster).
type Cluster interface {
	// ClusterStatus lists every member as this node sees it.
	ClusterStatus(ctx context.Context) (ClusterStatus, error)
	// ForgetNode removes a stopped member for good.
	ForgetNode(ctx context.Context, name string) error
	// Leave takes this node out of the cluster (leadership moved first).
	Leave(ctx context.Context) error
	// Join makes this node, alone and holding only its defaults, a member
	// of the cluster of the node whose cluster listener is at addr.
	Join(ctx context.Context, addr string) error
	// Drain moves every leadership off this node, then stops taking
	// clients; the node keeps its memberships (a restart or maintenance).
	Drain(ctx context.Context) error
	// Decommission drains, moves every membership off this node, then
	// leaves.
	Decommission(ctx context.Context) error
	// Draining reports whether this node is drained (or draining).
	Draining() bool
	// CallNode asks member node's API for what only that node knows (its
	// resources, its connections); HandleNode registers this node's answer
	// to method. Errors are gRPC status errors.
	CallNode(ctx context.Context, node, method string, req []byte) ([]byte, error)
	HandleNode(method string, h func(ctx context.Context, req []byte) ([]byte, error))
}

// ClusterStatus is GET /api/cluster/status: `warren ctl cluster-status`.
type ClusterStatus struct {
	// Node is the node that answered.
	Node string `json:"node"`
	// MetadataLeader is the metadata group's leader ("" during an election
	// or without a majority).
	MetadataLeader string        `json:"metadata_leader"`
	Nodes          []ClusterNode `json:"nodes"`
}

// ClusterNode is one member.
type ClusterNode struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	// Voter: a voting member of the metadata group (false while it is
	// being added).
	Voter bool `json:"voter"`
	// Running: the answering node reaches it (itself always).
	Running bool `json:"running"`
	// BeingDrained: it takes no clients and leads no group.
	BeingDrained bool `json:"being_drained"`
}

// clusterStatus is GET /api/cluster/status.
func (s *Server) clusterStatus(w http.ResponseWriter, r *http.Request, u caller) {
	st, err := s.b.ClusterStatus(r.Context())
	if err != nil {
		writeClusterError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// forgetNode is DELETE /api/cluster/nodes/{name}: `warren ctl forget-node`.
func (s *Server) forgetNode(w http.ResponseWriter, r *http.Request, u caller) {
	s.clusterOp(w, r, func(ctx context.Context) error { return s.b.ForgetNode(ctx, pv(r, "name")) })
}

// leaveCluster is POST /api/cluster/leave.
func (s *Server) leaveCluster(w http.ResponseWriter, r *http.Request, u caller) {
	s.clusterOp(w, r, s.b.Leave)
}

// joinCluster is POST /api/cluster/join {"address": "host:port"}: `warren
// ctl join`.
func (s *Server) joinCluster(w http.ResponseWriter, r *http.Request, u caller) {
	var body struct {
		Address string `json:"address"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if body.Address == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "join needs \"address\": the cluster address (host:port) of a node of the cluster to join")
		return
	}
	s.clusterOp(w, r, func(ctx context.Context) error { return s.b.Join(ctx, body.Address) })
}

// drainNode is POST /api/cluster/drain.
func (s *Server) drainNode(w http.ResponseWriter, r *http.Request, u caller) {
	s.clusterOp(w, r, s.b.Drain)
}

// decommissionNode is POST /api/cluster/decommission.
func (s *Server) decommissionNode(w http.ResponseWriter, r *http.Request, u caller) {
	s.clusterOp(w, r, s.b.Decommission)
}

// clusterOp runs a membership change with a bound of its own: a change
// waits for commits, not for the client.
func (s *Server) clusterOp(w http.ResponseWriter, r *http.Request, op func(context.Context) error) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	if err := op(ctx); err != nil {
		writeClusterError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeClusterError maps a cluster error's code to HTTP.
func writeClusterError(w http.ResponseWriter, err error) {
	code, reason := http.StatusServiceUnavailable, "unavailable"
	switch status.Code(err) {
	case codes.NotFound:
		code, reason = http.StatusNotFound, "not_found"
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists:
		code, reason = http.StatusBadRequest, "bad_request"
	case codes.DeadlineExceeded:
		code, reason = http.StatusGatewayTimeout, "timeout"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		code, reason = http.StatusGatewayTimeout, "timeout"
	}
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	writeError(w, code, reason, fmt.Sprint(msg))
}
