package transport

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
	"google.golang.org/protobuf/proto"
)

// seedMessages are one wire message of every Raft RPC and answer.
func seedMessages() []any {
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("n1")}
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "n1"}}})
	return []any{
		&raft.AppendEntriesRequest{RPCHeader: hdr, Term: 3, PrevLogEntry: 7, PrevLogTerm: 2, LeaderCommitIndex: 6, Entries: []*raft.Log{
			{Index: 8, Term: 3, Type: raft.LogCommand, Data: []byte("x"), Extensions: []byte("e"), AppendedAt: time.Unix(0, 12345)},
			{Index: 9, Term: 3, Type: raft.LogConfiguration, Data: conf},
			{Index: 10, Term: 3, Type: raft.LogNoop},
		}},
		&raft.AppendEntriesResponse{RPCHeader: hdr, Term: 3, LastLog: 10, Success: true, NoRetryBackoff: true},
		&raft.RequestVoteRequest{RPCHeader: hdr, Term: 4, LastLogIndex: 10, LastLogTerm: 3, LeadershipTransfer: true},
		&raft.RequestVoteResponse{RPCHeader: hdr, Term: 4, Granted: true},
		&raft.RequestPreVoteRequest{RPCHeader: hdr, Term: 5, LastLogIndex: 10, LastLogTerm: 3},
		&raft.RequestPreVoteResponse{RPCHeader: hdr, Term: 5, Granted: true},
		&raft.TimeoutNowRequest{RPCHeader: hdr},
		&raft.TimeoutNowResponse{RPCHeader: hdr},
		&raft.InstallSnapshotRequest{RPCHeader: hdr, SnapshotVersion: raft.SnapshotVersionMax, Term: 6, LastLogIndex: 10,
			LastLogTerm: 3, Configuration: conf, ConfigurationIndex: 9, Size: 1 << 20},
		&raft.InstallSnapshotResponse{RPCHeader: hdr, Term: 6, Success: true},
	}
}

// Every Raft RPC and answer survives the trip to the wire and back.
func TestRaftStructsRoundTrip(t *testing.T) {
	for _, v := range seedMessages() {
		m := &pb.Message{Id: 1, Group: "g"}
		must(t, setRaftBody(m, v))
		b, err := proto.Marshal(m)
		must(t, err)
		var back pb.Message
		must(t, proto.Unmarshal(b, &back))
		got, ok, err := raftBody(&back)
		if !ok || err != nil {
			t.Fatalf("%T: back from the wire: ok %v, %v", v, ok, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("%T: back from the wire\n got %+v\nwant %+v", v, got, v)
		}
	}
}

// Whatever a peer sends, decoding it never panics; what decodes encodes
// back to the same thing.
func FuzzRaftBody(f *testing.F) {
	for _, v := range seedMessages() {
		m := &pb.Message{Id: 1, Group: "g"}
		if err := setRaftBody(m, v); err != nil {
			f.Fatal(err)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m pb.Message
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		v, ok, err := raftBody(&m)
		if !ok || err != nil {
			return
		}
		again := &pb.Message{}
		if err := setRaftBody(again, v); err != nil {
			t.Fatalf("decoded %T does not encode: %v", v, err)
		}
		v2, ok, err := raftBody(again)
		if !ok || err != nil {
			t.Fatalf("re-encoded %T does not decode: %v", v, err)
		}
		if !reflect.DeepEqual(v, v2) {
			t.Fatalf("%T changed on a round trip:\n%+v\n%+v", v, v, v2)
		}
	})
}
