package meta

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// fsm is the metadata state machine of a Raft store: the State, the
// subscribers, and the index of the last entry applied, which writers wait
// on (read-your-writes on every node).
//
// raft calls ApplyBatch, Snapshot and Restore from one goroutine (the FSM
// goroutine); subscribers run there, after each entry, holding no lock of
// the fsm: they may read the store, must not write to it (the write would
// wait for this goroutine) nor block long.
type fsm struct {
	mu    sync.RWMutex // guards state for readers; written only by the FSM goroutine
	state *State       // the pointer never changes: Restore replaces its contents

	subMu  sync.Mutex
	subs   map[int]func(Event)
	nextID int

	sessions sessions // the FSM goroutine's alone (see raft_session.go)

	idxMu    sync.Mutex
	applied  uint64        // last entry index handed to the fsm
	commands uint64        // commands applied since the group began (refused ones too)
	advanced chan struct{} // closed and replaced when applied moves
	closed   chan struct{}
}

var _ raft.BatchingFSM = (*fsm)(nil)

func newFSM() *fsm {
	return &fsm{
		state:    NewState(),
		subs:     map[int]func(Event){},
		sessions: sessions{},
		advanced: make(chan struct{}),
		closed:   make(chan struct{}),
	}
}

// applyResult is an entry's response on the node that proposed it: the event
// published (Kind 0 for none; none either for a copy of a write already
// applied, whose changed is the first copy's) or why the command was
// refused.
type applyResult struct {
	ev      Event
	changed bool
	err     error
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: each command is validated and
// applied, and its event published, before the next; a refused command
// changes nothing and is answered with its error, the same on every node.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			out[i] = applyResult{}
			continue
		}
		res := f.applyEntry(l.Index, l.Data)
		out[i] = res
		if res.ev.Kind != 0 {
			f.publish(res.ev)
		}
	}
	if n := len(logs); n > 0 {
		f.advance(logs[n-1].Index)
	}
	return out
}

func (f *fsm) applyEntry(index uint64, data []byte) applyResult {
	f.idxMu.Lock()
	f.commands++
	f.idxMu.Unlock()
	e, err := decodeEntry(data)
	if err != nil {
		return applyResult{err: err}
	}
	if e.Req != nil {
		if res, isNew := f.sessions.check(e.Req, index); !isNew {
			return res
		}
	}
	res := f.applyCommand(e.Command)
	if e.Req != nil {
		f.sessions.record(e.Req, res)
	}
	return res
}

func (f *fsm) applyCommand(c Command) applyResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.state.Validate(c); err != nil {
		return applyResult{err: err}
	}
	ev := f.state.Apply(c)
	if c.Op == opSnapshot {
		ev = Event{Kind: Reset}
	}
	return applyResult{ev: ev, changed: ev.Kind != 0}
}

// decodeEntry reads an entry as every node reads it from the log.
func decodeEntry(data []byte) (entry, error) {
	if len(data) == 0 || len(data) > maxRecord {
		return entry{}, fmt.Errorf("%w: command of %d bytes", ErrInvalid, len(data))
	}
	var e entry
	if err := json.Unmarshal(data, &e); err != nil {
		return entry{}, fmt.Errorf("%w: undecodable command: %v", ErrInvalid, err)
	}
	if e.Req != nil && e.Req.Session == "" {
		return entry{}, fmt.Errorf("%w: request id without a session", ErrInvalid)
	}
	e.normalize()
	return e, nil
}

func (f *fsm) publish(ev Event) {
	f.subMu.Lock()
	subs := make([]func(Event), 0, len(f.subs))
	for _, fn := range f.subs {
		subs = append(subs, fn)
	}
	f.subMu.Unlock()
	for _, fn := range subs {
		fn(ev)
	}
}

func (f *fsm) subscribe(fn func(Event)) func() {
	f.subMu.Lock()
	defer f.subMu.Unlock()
	id := f.nextID
	f.nextID++
	f.subs[id] = fn
	return func() {
		f.subMu.Lock()
		delete(f.subs, id)
		f.subMu.Unlock()
	}
}

// advance records that the entries up to index are applied and wakes the
// writers waiting for them.
func (f *fsm) advance(index uint64) {
	f.idxMu.Lock()
	defer f.idxMu.Unlock()
	if index <= f.applied {
		return
	}
	f.applied = index
	close(f.advanced)
	f.advanced = make(chan struct{})
}

// waitApplied returns once the entry at index has been applied here (its
// event published), or ctx ends, or the store closes.
func (f *fsm) waitApplied(ctx context.Context, index uint64) error {
	for {
		f.idxMu.Lock()
		applied, ch := f.applied, f.advanced
		f.idxMu.Unlock()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-f.closed:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("meta: wait for entry %d to apply here (at %d): %w", index, applied, ctx.Err())
		}
	}
}

func (f *fsm) commandCount() uint64 {
	f.idxMu.Lock()
	defer f.idxMu.Unlock()
	return f.commands
}

// snapshotImage is a snapshot's content: the state, and the fsm's counters
// as of its last entry.
type snapshotImage struct {
	Index    uint64     `json:"index"`
	Commands uint64     `json:"commands"`
	Sessions []*session `json:"sessions,omitempty"`
	State    *State     `json:"state"`
}

// Snapshot implements raft.FSM: the state is encoded here, on the FSM
// goroutine (applies wait for it), so Persist only writes bytes.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.idxMu.Lock()
	img := snapshotImage{Index: f.applied, Commands: f.commands, Sessions: f.sessions.list()}
	f.idxMu.Unlock()
	f.mu.RLock()
	img.State = f.state
	data, err := json.Marshal(img)
	f.mu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("meta: encode snapshot: %w", err)
	}
	return fsmSnapshot(data), nil
}

// Restore implements raft.FSM: the state is replaced by the snapshot's and
// subscribers get a Reset event.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var img snapshotImage
	if err := json.NewDecoder(rc).Decode(&img); err != nil {
		return fmt.Errorf("meta: decode snapshot: %w", err)
	}
	if img.State == nil {
		return fmt.Errorf("meta: snapshot without a state")
	}
	img.State.init()
	img.State.normalize()
	ss := sessions{}
	for _, s := range img.Sessions {
		if s == nil || s.ID == "" {
			return fmt.Errorf("meta: snapshot with a session without an id")
		}
		if s.Outcomes == nil {
			s.Outcomes = map[uint64]outcome{}
		}
		ss[s.ID] = s
	}
	f.sessions = ss
	f.mu.Lock()
	*f.state = *img.State
	f.mu.Unlock()
	f.idxMu.Lock()
	f.commands = img.Commands
	f.idxMu.Unlock()
	f.publish(Event{Kind: Reset})
	f.advance(img.Index)
	return nil
}

type fsmSnapshot []byte

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("meta: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s fsmSnapshot) Release() {}
