package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// ErrGroupID is returned by every operation of a group whose id is empty
// or longer than 65535 bytes.
var ErrGroupID = errors.New("logstore: group id must be 1 to 65535 bytes")

// errNotFound is what hashicorp/raft expects from StableStore.Get for a
// missing key (it compares the text "not found").
var errNotFound = errors.New("not found")

// Group is one Raft group's view of a Store: its raft.LogStore and
// raft.StableStore. Writes of one group are serialized (raft issues them
// from one goroutine anyway); reads run concurrently with everything.
type Group struct {
	s    *Store
	id   string
	wmu  sync.Mutex // serializes this group's writes: held while queued
	done chan error // the answer to this group's one request in flight
}

var (
	_ raft.LogStore          = (*Group)(nil)
	_ raft.StableStore       = (*Group)(nil)
	_ raft.MonotonicLogStore = (*Group)(nil)
	_ GroupStore             = (*Group)(nil)
	_ GroupStores            = (*Store)(nil)
)

func (g *Group) checkID() error {
	if len(g.id) == 0 || len(g.id) > maxGroupID {
		return fmt.Errorf("%w (%d bytes)", ErrGroupID, len(g.id))
	}
	return nil
}

// IsMonotonic reports true: StoreLogs needs LastIndex()+1 (or an empty
// group), so raft removes all logs after restoring a snapshot.
func (g *Group) IsMonotonic() bool { return true }

// FirstIndex returns the first live index, 0 for an empty group.
func (g *Group) FirstIndex() (uint64, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if gi := g.s.idx.groups[g.id]; gi != nil && len(gi.locs) > 0 {
		return gi.first, nil
	}
	return 0, g.s.failedErr()
}

// LastIndex returns the last live index, 0 for an empty group.
func (g *Group) LastIndex() (uint64, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if gi := g.s.idx.groups[g.id]; gi != nil {
		return gi.last(), nil
	}
	return 0, g.s.failedErr()
}

// failedErr is ErrClosed after Close; callers hold mu. (A failed writer
// does not make reads of what is indexed wrong.)
func (s *Store) failedErr() error {
	if errors.Is(s.failed, ErrClosed) {
		return ErrClosed
	}
	return nil
}

// GetLog reads entry index into l, or returns raft.ErrLogNotFound.
func (g *Group) GetLog(index uint64, l *raft.Log) error {
	g.s.mu.RLock()
	if err := g.s.failedErr(); err != nil {
		g.s.mu.RUnlock()
		return err
	}
	gi := g.s.idx.groups[g.id]
	if gi == nil || len(gi.locs) == 0 || index < gi.first || index > gi.last() {
		g.s.mu.RUnlock()
		return raft.ErrLogNotFound
	}
	b, err := g.s.readAt(gi.locs[index-gi.first])
	g.s.mu.RUnlock()
	if err != nil {
		return err
	}
	rec, _, err := decodeRecord(b)
	if err != nil {
		return fmt.Errorf("logstore: group %q index %d: %w", g.id, index, err)
	}
	if (rec.kind != kindLog && rec.kind != kindMove) || rec.index != index || string(rec.group) != g.id {
		return fmt.Errorf("logstore: group %q index %d: index points at another record", g.id, index)
	}
	rec.toLog(l)
	return nil
}

// StoreLog stores one entry durably.
func (g *Group) StoreLog(l *raft.Log) error {
	return g.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores entries durably: it returns once they are written and
// fdatasynced (with whatever other groups queued meanwhile).
func (g *Group) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	if err := g.checkID(); err != nil {
		return err
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if err := g.checkAppend(logs); err != nil {
		return err
	}
	return g.s.submit(&request{group: g.id, logs: logs, done: g.done})
}

func (g *Group) checkAppend(logs []*raft.Log) error {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if g.s.failed != nil {
		return g.s.failed
	}
	var next uint64 // 0: any index may start an empty group
	if gi := g.s.idx.groups[g.id]; gi != nil && len(gi.locs) > 0 {
		next = gi.last() + 1
	}
	for _, l := range logs {
		if l.Index == 0 || (next != 0 && l.Index != next) {
			return fmt.Errorf("%w: group %q index %d, want %d", ErrNotMonotonic, g.id, l.Index, next)
		}
		if len(l.Data)+len(l.Extensions)+len(g.id)+64 > MaxRecordBytes {
			return fmt.Errorf("logstore: group %q index %d: entry of %d bytes exceeds %d", g.id, l.Index, len(l.Data)+len(l.Extensions), MaxRecordBytes)
		}
		next = l.Index + 1
	}
	return nil
}

// DeleteRange deletes entries min..max (inclusive) durably: a prefix
// (compaction after a snapshot), a suffix (a conflict) or everything.
func (g *Group) DeleteRange(min, max uint64) error {
	if err := g.checkID(); err != nil {
		return err
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	g.s.mu.RLock()
	err := g.s.failed
	ok := false
	if err == nil {
		var gi *groupIndex
		if gi = g.s.idx.groups[g.id]; gi != nil {
			_, _, ok, err = gi.deleteBounds(min, max)
		}
	}
	g.s.mu.RUnlock()
	if err != nil || !ok {
		return err
	}
	return g.s.submit(&request{group: g.id, del: true, min: min, max: max, done: g.done})
}

// Set stores key=val durably (fdatasynced before it returns).
func (g *Group) Set(key, val []byte) error {
	if err := g.checkID(); err != nil {
		return err
	}
	if len(key) > 1<<16-1 || len(val) > MaxRecordBytes-len(g.id)-len(key)-64 {
		return fmt.Errorf("logstore: group %q: stable key of %d or value of %d bytes too large", g.id, len(key), len(val))
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	return g.s.submit(&request{group: g.id, key: clone(key), val: clone(val), done: g.done})
}

// Get returns key's value, or an error "not found" (what raft expects).
func (g *Group) Get(key []byte) ([]byte, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if err := g.s.failedErr(); err != nil {
		return nil, err
	}
	if gi := g.s.idx.groups[g.id]; gi != nil {
		if v, ok := gi.stable[string(key)]; ok {
			return clone(v.val), nil
		}
	}
	return nil, errNotFound
}

// SetUint64 stores key=val as 8 little-endian bytes.
func (g *Group) SetUint64(key []byte, val uint64) error {
	return g.Set(key, binary.LittleEndian.AppendUint64(nil, val))
}

// GetUint64 returns key's value, 0 if it was never set.
func (g *Group) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
	if err != nil {
		if errors.Is(err, errNotFound) {
			return 0, nil
		}
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("logstore: group %q: key %q holds %d bytes, not a uint64", g.id, key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}
