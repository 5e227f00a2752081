// Package clusterpb is the wire protocol between Warren nodes, generated
// from cluster.proto by `make generate` (protoc pinned in hack/protoc.sh,
// protoc-gen-go and protoc-gen-go-grpc pinned by go.mod's tool directives).
// Only broker/cluster/transport uses it: it maps hashicorp/raft's structs to
// these messages field by field and checks what a peer sends before Raft
// sees it.
package clusterpb
