// Package clustertest holds what the cluster packages' tests share: a
// small raft.FSM. It is imported by tests only.
package clustertest

import (
	"io"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
)

// Counter is a raft.FSM that records the distinct commands it applied (a
// command retried after a lost leadership counts once); its snapshot is
// the set of commands. Safe for concurrent use.
type Counter struct {
	mu   sync.Mutex
	seen map[string]bool
}

// Apply implements raft.FSM.
func (c *Counter) Apply(l *raft.Log) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[string(l.Data)] = true
	return nil
}

// Count is the number of distinct commands applied.
func (c *Counter) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// Snapshot implements raft.FSM.
func (c *Counter) Snapshot() (raft.FSMSnapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.seen))
	for k := range c.seen {
		keys = append(keys, k)
	}
	return snapshot(strings.Join(keys, "\n")), nil
}

// Restore implements raft.FSM.
func (c *Counter) Restore(r io.ReadCloser) error {
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = map[string]bool{}
	for _, k := range strings.Split(string(b), "\n") {
		if k != "" {
			c.seen[k] = true
		}
	}
	return nil
}

type snapshot string

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write([]byte(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (snapshot) Release() {}
