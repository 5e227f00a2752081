// Package clusterpb is the wire protocol between Warren nodes, generated
// from cluster.proto by `make generate` (protoc pinned in hack/protoc.sh,
// protoc-gen-go, protoc-gen-go-grpc and protoc-gen-go-vtproto pinned by
// go.mod's tool directives). cluster_vtproto.pb.go (planetscale/vtprotobuf)
// gives every message SizeVT, MarshalToSizedBufferVT and UnmarshalVT: the
// same encoding as package proto's, without reflection (decoding is more
// lenient: it does not check that strings are UTF-8); the call lane
// encodes and decodes its Frames with them. The pinned generator sizes a
// Message whose body is a Raft request or answer (fields 10 to 15) with a
// nil message one byte too large (fixed upstream by vtprotobuf's PR 137,
// in a version the module proxy used here does not serve): the transport
// always sets a body's message, and the lane refuses to send a frame whose
// encoding does not fill its size.
// Only broker/cluster/transport uses it: it maps hashicorp/raft's structs to
// these messages field by field and checks what a peer sends before Raft
// sees it.
package clusterpb
