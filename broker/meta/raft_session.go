package meta

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exactly-once writes. A write whose leader is lost before it answered is
// sent again, and both copies may reach the log. So every write carries a
// request id: the writing store's session (node name and a random id per
// OpenRaft) and a sequence number, with the lowest sequence number the
// session still waits for. The state machine keeps, per session, the
// outcome of each write not yet acknowledged: a copy of a write already
// applied is answered with the first outcome and changes nothing, and a
// copy older than the session's lowest outstanding write is dropped. Like
// everything the state machine decides, the table is the same on every
// node and travels in snapshots (raft thesis, 6.3).

// maxSessions bounds the table: past it, the session that wrote least
// recently (by log index, so every node drops the same) is forgotten.
const maxSessions = 256

// reqID identifies a write; Low is the lowest sequence number its session
// still waits for (every write below it was answered).
type reqID struct {
	Session string `json:"s"`
	Seq     uint64 `json:"n"`
	Low     uint64 `json:"low"`
}

// entry is a log entry of the metadata group: a Command, with the
// request id alongside its fields.
type entry struct {
	Command
	Req *reqID `json:"req,omitempty"`
}

// outcome is what the state machine answered a write: whether it changed
// anything, or its refusal as a status code and message (as it crosses
// nodes, so it is rebuilt by fromStatus).
type outcome struct {
	Changed bool   `json:"changed,omitempty"`
	Code    uint32 `json:"code,omitempty"`
	Msg     string `json:"msg,omitempty"`
}

func outcomeOf(res applyResult) outcome {
	if res.err == nil {
		return outcome{Changed: res.changed}
	}
	st, _ := status.FromError(toStatus(res.err))
	return outcome{Code: uint32(st.Code()), Msg: st.Message()}
}

func (o outcome) result() applyResult {
	if o.Code == 0 {
		return applyResult{changed: o.Changed}
	}
	return applyResult{err: fromStatus(status.Error(codes.Code(o.Code), o.Msg))}
}

// session is one writer's outcomes not yet acknowledged.
type session struct {
	ID       string             `json:"id"`
	Low      uint64             `json:"low"`
	LastUsed uint64             `json:"last_used"` // log index of its latest write
	Outcomes map[uint64]outcome `json:"outcomes,omitempty"`
}

// sessions is the state machine's table; only the FSM goroutine uses it.
type sessions map[string]*session

// check says whether the write r at index is new (apply it) or a copy
// (answer with the outcome returned).
func (ss sessions) check(r *reqID, index uint64) (applyResult, bool) {
	s := ss[r.Session]
	if s == nil {
		s = &session{ID: r.Session, Outcomes: map[uint64]outcome{}}
		ss[r.Session] = s
	}
	s.LastUsed = index
	ss.evict()
	if r.Low > s.Low {
		s.Low = r.Low
		for seq := range s.Outcomes {
			if seq < s.Low {
				delete(s.Outcomes, seq)
			}
		}
	}
	if o, ok := s.Outcomes[r.Seq]; ok {
		return o.result(), false
	}
	if r.Seq < s.Low {
		// A late copy of a write its session already saw answered.
		return applyResult{}, false
	}
	return applyResult{}, true
}

// record keeps the outcome of the new write r.
func (ss sessions) record(r *reqID, res applyResult) {
	if s := ss[r.Session]; s != nil {
		s.Outcomes[r.Seq] = outcomeOf(res)
	}
}

func (ss sessions) evict() {
	for len(ss) > maxSessions {
		var oldest *session
		for _, s := range ss {
			if oldest == nil || s.LastUsed < oldest.LastUsed || (s.LastUsed == oldest.LastUsed && s.ID < oldest.ID) {
				oldest = s
			}
		}
		delete(ss, oldest.ID)
	}
}

// list is the table in a stable order, for a snapshot.
func (ss sessions) list() []*session {
	out := make([]*session, 0, len(ss))
	for _, s := range ss {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *session) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out
}

// writer numbers a store's writes and knows the lowest still waiting.
type writer struct {
	session string

	mu          sync.Mutex
	next        uint64
	outstanding map[uint64]struct{}
}

func newWriter(node string) *writer {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &writer{session: node + "/" + hex.EncodeToString(b), next: 1, outstanding: map[uint64]struct{}{}}
}

// start numbers a new write.
func (w *writer) start() *reqID {
	w.mu.Lock()
	defer w.mu.Unlock()
	seq := w.next
	w.next++
	w.outstanding[seq] = struct{}{}
	low := seq
	for s := range w.outstanding {
		low = min(low, s)
	}
	return &reqID{Session: w.session, Seq: seq, Low: low}
}

// done marks a write answered (or abandoned: it is never sent again).
func (w *writer) done(r *reqID) {
	w.mu.Lock()
	delete(w.outstanding, r.Seq)
	w.mu.Unlock()
}
