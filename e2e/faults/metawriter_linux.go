//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// MetaWrite is one metadata write a MetaWriter made: a user, an exchange or
// a durable queue (in vhost /) named Name.
type MetaWrite struct {
	Kind string // "users", "exchanges" or "queues"
	Name string
	Node string // the node it was sent to
}

// MetaWriter makes metadata writes through the management API, one after
// the other, each to the next of its nodes in turn: a user, an exchange, a
// durable queue, again. It records the writes a node acknowledged (2xx) and
// counts the others; a write is never retried (an unacknowledged one may or
// may not have been applied).
type MetaWriter struct {
	c       *Cluster
	prefix  string
	nodes   []*Node
	timeout time.Duration
	cancel  context.CancelFunc
	done    chan struct{}

	mu      sync.Mutex
	acked   []MetaWrite
	failed  int
	lastErr error
	last    time.Time     // the last acknowledgement (or the start)
	maxGap  time.Duration // the longest time without an acknowledgement
}

// StartMetaWriter starts writing to nodes (in turn) until Stop; names start
// with prefix. Each write waits at most timeout for its answer.
func (c *Cluster) StartMetaWriter(prefix string, timeout time.Duration, nodes ...*Node) *MetaWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &MetaWriter{c: c, prefix: prefix, nodes: nodes, timeout: timeout, cancel: cancel, done: make(chan struct{}), last: time.Now()}
	go w.loop(ctx)
	return w
}

var metaKinds = []string{"users", "exchanges", "queues"}

func (w *MetaWriter) loop(ctx context.Context) {
	defer close(w.done)
	for i := 0; ctx.Err() == nil; i++ {
		n := w.nodes[i%len(w.nodes)]
		mw := MetaWrite{Kind: metaKinds[i%len(metaKinds)], Name: fmt.Sprintf("%s%d", w.prefix, i), Node: n.Name}
		err := w.c.PutMeta(ctx, n, mw, w.timeout)
		now := time.Now()
		w.mu.Lock()
		if err == nil {
			w.maxGap = max(w.maxGap, now.Sub(w.last))
			w.last = now
			w.acked = append(w.acked, mw)
		} else if ctx.Err() == nil {
			w.failed++
			w.lastErr = err
		}
		w.mu.Unlock()
		if err != nil {
			sleep(ctx, 50*time.Millisecond)
		}
	}
}

// PutMeta makes one metadata write on node n and waits at most timeout for
// its answer: nil when n acknowledged it (2xx).
func (c *Cluster) PutMeta(ctx context.Context, n *Node, mw MetaWrite, timeout time.Duration) error {
	var path string
	var body any
	switch mw.Kind {
	case "users":
		path, body = "/api/users/"+url.PathEscape(mw.Name), map[string]any{"password": "p-" + mw.Name, "tags": ""}
	case "exchanges":
		path, body = "/api/exchanges/%2F/"+url.PathEscape(mw.Name), map[string]any{"type": "direct", "durable": true}
	case "queues":
		path, body = "/api/queues/%2F/"+url.PathEscape(mw.Name), map[string]any{"durable": true}
	default:
		return fmt.Errorf("PutMeta: kind %q", mw.Kind)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, b, err := c.HTTP(ctx, n, http.MethodPut, path, body)
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return fmt.Errorf("%s: PUT %s: %d %s", n.Name, path, code, strings.TrimSpace(string(b)))
	}
	return nil
}

// MetaWriterStats is what a MetaWriter did.
type MetaWriterStats struct {
	Acked, Failed int
	LastErr       error
	// MaxGap is the longest time between two acknowledgements (or from the
	// start to the first, or from the last to Stop).
	MaxGap time.Duration
}

func (s MetaWriterStats) String() string {
	return fmt.Sprintf("%d acknowledged, %d failed, longest gap %v (last error: %v)", s.Acked, s.Failed, s.MaxGap.Round(time.Millisecond), s.LastErr)
}

// Stats returns the counts so far.
func (w *MetaWriter) Stats() MetaWriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return MetaWriterStats{Acked: len(w.acked), Failed: w.failed, LastErr: w.lastErr, MaxGap: max(w.maxGap, time.Since(w.last))}
}

// Stop stops writing and returns the stats.
func (w *MetaWriter) Stop() MetaWriterStats {
	w.cancel()
	<-w.done
	return w.Stats()
}

// Record adds a write acknowledged elsewhere (made with PutMeta) to the
// writes checked with Acked.
func (w *MetaWriter) Record(mw MetaWrite) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acked = append(w.acked, mw)
}

// Acked returns the writes a node acknowledged.
func (w *MetaWriter) Acked() []MetaWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]MetaWrite(nil), w.acked...)
}

// MissingWrites returns the writes of acked that node n's definitions
// export lacks (an acknowledged write that was lost).
func (c *Cluster) MissingWrites(n *Node, acked []MetaWrite) ([]MetaWrite, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	doc, err := FetchDefinitions(ctx, http.DefaultClient, n.HTTPURL())
	if err != nil {
		return nil, err
	}
	have, err := DefinedNames(doc)
	if err != nil {
		return nil, err
	}
	var missing []MetaWrite
	for _, mw := range acked {
		if !have[mw.Kind][mw.Name] {
			missing = append(missing, mw)
		}
	}
	return missing, nil
}

// DefinedNames returns, per kind (users, vhosts, exchanges, queues, ...),
// the names a definitions export holds.
func DefinedNames(doc []byte) (map[string]map[string]bool, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, err
	}
	out := map[string]map[string]bool{}
	for kind, raw := range top {
		var items []struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &items) != nil {
			continue // not a list of named items
		}
		out[kind] = map[string]bool{}
		for _, it := range items {
			out[kind][it.Name] = true
		}
	}
	return out, nil
}
