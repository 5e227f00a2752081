package transport

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
)

// This file maps hashicorp/raft's RPC structs to the wire messages of
// clusterpb field by field, and back. The way back checks what Raft would
// otherwise trust or panic on: a known log type, configurations that
// decode, snapshot version and size in range. A message that fails is
// malformed: its stream closes.

// setRaftBody sets m's body to the raft request or response v.
func setRaftBody(m *pb.Message, v any) error {
	switch v := v.(type) {
	case *raft.AppendEntriesRequest:
		m.Body = &pb.Message_AppendEntries{AppendEntries: appendReqToPB(v)}
	case *raft.AppendEntriesResponse:
		m.Body = &pb.Message_AppendEntriesResp{AppendEntriesResp: &pb.AppendEntriesResponse{
			Header: headerToPB(v.RPCHeader), Term: v.Term, LastLog: v.LastLog, Success: v.Success, NoRetryBackoff: v.NoRetryBackoff,
		}}
	case *raft.RequestVoteRequest:
		//lint:ignore SA1019 carried as Raft sends it, for its own compatibility rules
		candidate := v.Candidate
		m.Body = &pb.Message_RequestVote{RequestVote: &pb.RequestVoteRequest{
			Header: headerToPB(v.RPCHeader), Term: v.Term, Candidate: candidate,
			LastLogIndex: v.LastLogIndex, LastLogTerm: v.LastLogTerm, LeadershipTransfer: v.LeadershipTransfer,
		}}
	case *raft.RequestVoteResponse:
		m.Body = &pb.Message_RequestVoteResp{RequestVoteResp: &pb.RequestVoteResponse{
			Header: headerToPB(v.RPCHeader), Term: v.Term, Peers: v.Peers, Granted: v.Granted,
		}}
	case *raft.RequestPreVoteRequest:
		m.Body = &pb.Message_RequestPreVote{RequestPreVote: &pb.RequestPreVoteRequest{
			Header: headerToPB(v.RPCHeader), Term: v.Term, LastLogIndex: v.LastLogIndex, LastLogTerm: v.LastLogTerm,
		}}
	case *raft.RequestPreVoteResponse:
		m.Body = &pb.Message_RequestPreVoteResp{RequestPreVoteResp: &pb.RequestPreVoteResponse{
			Header: headerToPB(v.RPCHeader), Term: v.Term, Granted: v.Granted,
		}}
	case *raft.TimeoutNowRequest:
		m.Body = &pb.Message_TimeoutNow{TimeoutNow: &pb.TimeoutNowRequest{Header: headerToPB(v.RPCHeader)}}
	case *raft.TimeoutNowResponse:
		m.Body = &pb.Message_TimeoutNowResp{TimeoutNowResp: &pb.TimeoutNowResponse{Header: headerToPB(v.RPCHeader)}}
	case *raft.InstallSnapshotRequest:
		m.Body = &pb.Message_InstallSnapshot{InstallSnapshot: &pb.InstallSnapshotRequest{
			Header: headerToPB(v.RPCHeader), SnapshotVersion: int64(v.SnapshotVersion), Term: v.Term, Leader: v.Leader,
			LastLogIndex: v.LastLogIndex, LastLogTerm: v.LastLogTerm, Peers: v.Peers,
			Configuration: v.Configuration, ConfigurationIndex: v.ConfigurationIndex, Size: v.Size,
		}}
	case *raft.InstallSnapshotResponse:
		m.Body = &pb.Message_InstallSnapshotResp{InstallSnapshotResp: &pb.InstallSnapshotResponse{
			Header: headerToPB(v.RPCHeader), Term: v.Term, Success: v.Success,
		}}
	default:
		return fmt.Errorf("no wire message for %T", v)
	}
	return nil
}

func headerToPB(h raft.RPCHeader) *pb.RPCHeader {
	return &pb.RPCHeader{ProtocolVersion: int64(h.ProtocolVersion), Id: h.ID, Addr: h.Addr}
}

func appendReqToPB(v *raft.AppendEntriesRequest) *pb.AppendEntriesRequest {
	//lint:ignore SA1019 carried as Raft sends it, for its own compatibility rules
	leader := v.Leader
	out := &pb.AppendEntriesRequest{
		Header: headerToPB(v.RPCHeader), Term: v.Term, Leader: leader,
		PrevLogEntry: v.PrevLogEntry, PrevLogTerm: v.PrevLogTerm, LeaderCommitIndex: v.LeaderCommitIndex,
	}
	if len(v.Entries) > 0 {
		logs := make([]pb.Log, len(v.Entries)) // one allocation for the entries
		out.Entries = make([]*pb.Log, len(v.Entries))
		for i, l := range v.Entries {
			logs[i] = pb.Log{Index: l.Index, Term: l.Term, Type: uint32(l.Type), Data: l.Data, Extensions: l.Extensions}
			if !l.AppendedAt.IsZero() {
				logs[i].AppendedAtUnixNano = l.AppendedAt.UnixNano()
			}
			out.Entries[i] = &logs[i]
		}
	}
	return out
}

// raftBody returns the raft request or response in m's body; a body that
// is not a Raft RPC gives ok false.
func raftBody(m *pb.Message) (v any, ok bool, err error) {
	switch b := m.GetBody().(type) {
	case *pb.Message_AppendEntries:
		v, err = appendReqFromPB(b.AppendEntries)
	case *pb.Message_AppendEntriesResp:
		r := b.AppendEntriesResp
		var h raft.RPCHeader
		h, err = headerFromPB(r.GetHeader())
		v = &raft.AppendEntriesResponse{RPCHeader: h, Term: r.GetTerm(), LastLog: r.GetLastLog(), Success: r.GetSuccess(), NoRetryBackoff: r.GetNoRetryBackoff()}
	case *pb.Message_RequestVote:
		r := b.RequestVote
		var h raft.RPCHeader
		h, err = headerFromPB(r.GetHeader())
		v = &raft.RequestVoteRequest{RPCHeader: h, Term: r.GetTerm(), Candidate: r.GetCandidate(),
			LastLogIndex: r.GetLastLogIndex(), LastLogTerm: r.GetLastLogTerm(), LeadershipTransfer: r.GetLeadershipTransfer()}
	case *pb.Message_RequestVoteResp:
		r := b.RequestVoteResp
		var h raft.RPCHeader
		h, err = headerFromPB(r.GetHeader())
		v = &raft.RequestVoteResponse{RPCHeader: h, Term: r.GetTerm(), Peers: r.GetPeers(), Granted: r.GetGranted()}
	case *pb.Message_RequestPreVote:
		r := b.RequestPreVote
		var h raft.RPCHeader
		h, err = headerFromPB(r.GetHeader())
		v = &raft.RequestPreVoteRequest{RPCHeader: h, Term: r.GetTerm(), LastLogIndex: r.GetLastLogIndex(), LastLogTerm: r.GetLastLogTerm()}
	case *pb.Message_RequestPreVoteResp:
		r := b.RequestPreVoteResp
		var h raft.RPCHeader
		h, err = headerFromPB(r.GetHeader())
		v = &raft.RequestPreVoteResponse{RPCHeader: h, Term: r.GetTerm(), Granted: r.GetGranted()}
	case *pb.Message_TimeoutNow:
		var h raft.RPCHeader
		h, err = headerFromPB(b.TimeoutNow.GetHeader())
		v = &raft.TimeoutNowRequest{RPCHeader: h}
	case *pb.Message_TimeoutNowResp:
		var h raft.RPCHeader
		h, err = headerFromPB(b.TimeoutNowResp.GetHeader())
		v = &raft.TimeoutNowResponse{RPCHeader: h}
	case *pb.Message_InstallSnapshot:
		v, err = installReqFromPB(b.InstallSnapshot)
	case *pb.Message_InstallSnapshotResp:
		r := b.InstallSnapshotResp
		var h raft.RPCHeader
		h, err = headerFromPB(r.GetHeader())
		v = &raft.InstallSnapshotResponse{RPCHeader: h, Term: r.GetTerm(), Success: r.GetSuccess()}
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	return v, true, nil
}

func headerFromPB(h *pb.RPCHeader) (raft.RPCHeader, error) {
	v := h.GetProtocolVersion()
	if v < int64(raft.ProtocolVersionMin) || v > int64(raft.ProtocolVersionMax) {
		return raft.RPCHeader{}, fmt.Errorf("raft protocol version %d not in %d..%d", v, raft.ProtocolVersionMin, raft.ProtocolVersionMax)
	}
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(v), ID: h.GetId(), Addr: h.GetAddr()}, nil
}

func appendReqFromPB(r *pb.AppendEntriesRequest) (*raft.AppendEntriesRequest, error) {
	h, err := headerFromPB(r.GetHeader())
	if err != nil {
		return nil, err
	}
	out := &raft.AppendEntriesRequest{
		RPCHeader: h, Term: r.GetTerm(), Leader: r.GetLeader(),
		PrevLogEntry: r.GetPrevLogEntry(), PrevLogTerm: r.GetPrevLogTerm(), LeaderCommitIndex: r.GetLeaderCommitIndex(),
	}
	if n := len(r.GetEntries()); n > 0 {
		logs := make([]raft.Log, n)
		out.Entries = make([]*raft.Log, n)
		for i, l := range r.GetEntries() {
			if err := logFromPB(l, &logs[i]); err != nil {
				return nil, fmt.Errorf("entry %d: %w", i, err)
			}
			out.Entries[i] = &logs[i]
		}
	}
	return out, nil
}

func logFromPB(l *pb.Log, out *raft.Log) error {
	t := raft.LogType(l.GetType())
	switch {
	case l.GetType() > 255:
		return fmt.Errorf("log type %d", l.GetType())
	case t == raft.LogConfiguration:
		if err := checkConfiguration(l.GetData()); err != nil {
			return err
		}
	case t != raft.LogCommand && t != raft.LogNoop && t != raft.LogBarrier:
		return fmt.Errorf("log type %v not sent by this Raft version", t)
	}
	*out = raft.Log{Index: l.GetIndex(), Term: l.GetTerm(), Type: t, Data: l.GetData(), Extensions: l.GetExtensions()}
	if ns := l.GetAppendedAtUnixNano(); ns != 0 {
		out.AppendedAt = time.Unix(0, ns)
	}
	return nil
}

func installReqFromPB(r *pb.InstallSnapshotRequest) (*raft.InstallSnapshotRequest, error) {
	h, err := headerFromPB(r.GetHeader())
	if err != nil {
		return nil, err
	}
	v := r.GetSnapshotVersion()
	if v < int64(raft.SnapshotVersionMin) || v > int64(raft.SnapshotVersionMax) {
		return nil, fmt.Errorf("snapshot version %d not in %d..%d", v, raft.SnapshotVersionMin, raft.SnapshotVersionMax)
	}
	if r.GetSize() < 0 {
		return nil, fmt.Errorf("snapshot size %d", r.GetSize())
	}
	if v > 0 {
		if err := checkConfiguration(r.GetConfiguration()); err != nil {
			return nil, err
		}
	}
	return &raft.InstallSnapshotRequest{
		RPCHeader: h, SnapshotVersion: raft.SnapshotVersion(v), Term: r.GetTerm(), Leader: r.GetLeader(),
		LastLogIndex: r.GetLastLogIndex(), LastLogTerm: r.GetLastLogTerm(), Peers: r.GetPeers(),
		Configuration: r.GetConfiguration(), ConfigurationIndex: r.GetConfigurationIndex(), Size: r.GetSize(),
	}, nil
}

// checkConfiguration reports whether b decodes as a Raft configuration:
// raft.DecodeConfiguration, which Raft calls on it, panics on bad input.
func checkConfiguration(b []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("raft configuration does not decode: %v", p)
		}
	}()
	raft.DecodeConfiguration(b)
	return nil
}
