package logstore

import (
	"sync"

	"github.com/hashicorp/raft"
)

// GroupStore is what one Raft group needs from storage: hashicorp/raft's
// LogStore and StableStore. Implementations are safe for concurrent use.
type GroupStore interface {
	raft.LogStore
	raft.StableStore
}

// GroupStores hands out each group's store. Group is safe for concurrent
// use and returns the same GroupStore for the same id every time; Drop
// removes a group whose raft was shut down (a later Group(id) starts
// empty). The cluster layer takes this interface: *Store on disk, *Inmem
// in tests.
type GroupStores interface {
	Group(id string) GroupStore
	Drop(id string) error
}

// Inmem is the in-memory twin of Store for fast tests of the cluster
// layer: one raft.InmemStore per group, nothing durable.
type Inmem struct {
	mu     sync.Mutex
	groups map[string]*raft.InmemStore
}

var _ GroupStores = (*Inmem)(nil)

// NewInmem returns an empty in-memory store.
func NewInmem() *Inmem {
	return &Inmem{groups: map[string]*raft.InmemStore{}}
}

// Group returns group id's in-memory store, created on first use.
func (m *Inmem) Group(id string) GroupStore {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[id]
	if g == nil {
		g = raft.NewInmemStore()
		m.groups[id] = g
	}
	return g
}

// Drop forgets group id.
func (m *Inmem) Drop(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.groups, id)
	return nil
}
