package logstore

import (
	"errors"
	"fmt"
)

// Errors of the per-group rules. The file store refuses, before anything is
// written, what the in-memory index could not represent; recovery applies
// the same rules to what it reads back.
var (
	// ErrNotMonotonic: StoreLogs of an index other than LastIndex()+1 on a
	// non-empty group (the store implements raft.MonotonicLogStore).
	ErrNotMonotonic = errors.New("logstore: log index is not LastIndex+1")
	// ErrHole: DeleteRange of neither a prefix nor a suffix of the group's log.
	ErrHole = errors.New("logstore: DeleteRange would leave a hole in the log")
)

// loc is where a record lives: segment sequence number, offset, length.
type loc struct {
	seg uint64
	off int64
	n   uint32
}

type stableVal struct {
	val []byte
	seg uint64
}

// groupIndex is the in-memory index of one group: its live entries
// first..first+len(locs)-1 and its stable values. Guarded by Store.mu.
type groupIndex struct {
	first  uint64
	locs   []loc
	stable map[string]stableVal
}

func (g *groupIndex) last() uint64 {
	if len(g.locs) == 0 {
		return 0
	}
	return g.first + uint64(len(g.locs)) - 1
}

// deleteBounds clamps [min,max] to the group's live entries and says what
// it removes: nothing, a prefix, a suffix or everything. A range strictly
// inside the log is ErrHole.
func (g *groupIndex) deleteBounds(min, max uint64) (lo, hi uint64, ok bool, err error) {
	if len(g.locs) == 0 || min > max {
		return 0, 0, false, nil
	}
	first, last := g.first, g.last()
	lo, hi = maxU(min, first), minU(max, last)
	if lo > hi {
		return 0, 0, false, nil
	}
	if lo != first && hi != last {
		return 0, 0, false, fmt.Errorf("%w: [%d,%d] inside [%d,%d]", ErrHole, min, max, first, last)
	}
	return lo, hi, true, nil
}

func minU(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// liveCounts is what keeps a segment: live log entries and current stable
// values located in it.
type liveCounts struct {
	logs, stable int
	bytes        int64 // of the live log entries
}

// index is the node-wide in-memory index: every group and the live counts
// of every segment. All methods need Store.mu held for writing.
type index struct {
	groups map[string]*groupIndex
	live   map[uint64]*liveCounts
}

func newIndex() *index {
	return &index{groups: map[string]*groupIndex{}, live: map[uint64]*liveCounts{}}
}

func (x *index) group(id string) *groupIndex {
	g := x.groups[id]
	if g == nil {
		g = &groupIndex{stable: map[string]stableVal{}}
		x.groups[id] = g
	}
	return g
}

func (x *index) counts(seg uint64) *liveCounts {
	c := x.live[seg]
	if c == nil {
		c = &liveCounts{}
		x.live[seg] = c
	}
	return c
}

// applyLog appends entry index of group at l. A non-empty group whose last
// is not index-1 is ErrNotMonotonic (recovery: the group lost a prefix to a
// deleted segment only if all of it was dead, so this cannot happen on a
// log this store wrote).
func (x *index) applyLog(group string, index uint64, l loc) error {
	g := x.group(group)
	if len(g.locs) == 0 {
		g.first = index
	} else if index != g.last()+1 {
		return fmt.Errorf("%w: group %q index %d after last %d", ErrNotMonotonic, group, index, g.last())
	}
	g.locs = append(g.locs, l)
	c := x.counts(l.seg)
	c.logs++
	c.bytes += int64(l.n)
	return nil
}

// applyDelete removes [min,max] of group's entries (clamped).
func (x *index) applyDelete(group string, min, max uint64) error {
	g := x.group(group)
	lo, hi, ok, err := g.deleteBounds(min, max)
	if err != nil || !ok {
		return err
	}
	from, to := lo-g.first, hi-g.first+1
	for _, l := range g.locs[from:to] {
		c := x.counts(l.seg)
		c.logs--
		c.bytes -= int64(l.n)
	}
	if from == 0 {
		g.first = hi + 1
		g.locs = g.locs[to:]
		if cap(g.locs) > 2*len(g.locs)+64 { // let the compacted prefix be freed
			g.locs = append([]loc(nil), g.locs...)
		}
	} else {
		g.locs = g.locs[:from]
	}
	if len(g.locs) == 0 {
		g.first, g.locs = 0, nil
	}
	return nil
}

// applyMove points live entry index of group at its copy l.
func (x *index) applyMove(group string, index uint64, l loc) error {
	g := x.groups[group]
	if g == nil || len(g.locs) == 0 || index < g.first || index > g.last() {
		return fmt.Errorf("logstore: group %q: move of index %d, not live", group, index)
	}
	old := &g.locs[index-g.first]
	c := x.counts(old.seg)
	c.logs--
	c.bytes -= int64(old.n)
	*old = l
	c = x.counts(l.seg)
	c.logs++
	c.bytes += int64(l.n)
	return nil
}

// applyDrop forgets group: its entries and stable values.
func (x *index) applyDrop(group string) {
	g := x.groups[group]
	if g == nil {
		return
	}
	for _, l := range g.locs {
		c := x.counts(l.seg)
		c.logs--
		c.bytes -= int64(l.n)
	}
	for _, v := range g.stable {
		x.counts(v.seg).stable--
	}
	delete(x.groups, group)
}

func (x *index) applyStable(group string, key, val []byte, seg uint64) {
	g := x.group(group)
	if old, ok := g.stable[string(key)]; ok {
		x.counts(old.seg).stable--
	}
	g.stable[string(key)] = stableVal{val: clone(val), seg: seg}
	x.counts(seg).stable++
}
