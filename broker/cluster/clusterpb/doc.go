// Package clusterpb is the wire protocol between Warren nodes, generated
// from cluster.proto by `make generate` (protoc pinned in hack/protoc.sh,
// protoc-gen-go, protoc-gen-go-grpc and protoc-gen-go-vtproto pinned by
// go.mod's tool directives). cluster_vtproto.pb.go (planetscale/vtprotobuf)
// gives every message SizeVT, MarshalToSizedBufferVT and UnmarshalVT: the
// same encoding as package proto's, without reflection; the call lane
// encodes and decodes its Frames with them.
// Only broker/cluster/transport uses it: it maps hashicorp/raft's structs to
// these messages field by field and checks what a peer sends before Raft
// sees it.
package clusterpb
