package transport

import (
	"sync"
	"sync/atomic"
	"time"
)

// heard records, for each peer this node has had an address for, when a
// frame from it last arrived: an answer on one of this node's streams to
// it or a request on one of its streams to this node. Any frame proves the
// peer's process runs and reaches this node, so the node heartbeat (a
// ping) only goes out after PingInterval of silence: in a cluster whose
// Raft leaders heartbeat their followers, pings flow only between nodes
// that have nothing else to say to each other.
//
// Entries are made by SetAddress and never removed (one per node the
// cluster ever had), so a stream holds its peer's entry for its life.
type heard struct {
	origin time.Time // times are monotonic nanoseconds since origin

	mu    sync.Mutex
	nodes map[string]*lastHeard
}

// lastHeard is when a peer was last heard from: nanoseconds since
// heard.origin (0: never); and the ping timer of the peer's connection
// while the peer is healthy (nil otherwise).
type lastHeard struct {
	at     atomic.Int64
	pinger atomic.Pointer[pingTimer]
}

// pingTimer wakes a connection's ping goroutine (peerConn.ping) when its
// peer has been silent for every. A frame from the peer pushes it back to
// a full interval, at most once a quarter of an interval (a loaded link
// resets no timer at each frame), so it fires between three quarters of
// an interval and an interval after the last frame, and only then: on an
// idle cluster whose Raft leaders heartbeat their followers, the ping
// goroutines sleep instead of waking at each silence's expected end.
type pingTimer struct {
	t      *time.Timer
	every  time.Duration
	pushed atomic.Int64 // when a frame last pushed t back (as heard.at)
}

func newHeard() *heard {
	return &heard{origin: time.Now(), nodes: map[string]*lastHeard{}}
}

// of returns node's entry, made when add is set; nil when there is none.
func (h *heard) of(node string, add bool) *lastHeard {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.nodes[node]
	if l == nil && add {
		l = &lastHeard{}
		h.nodes[node] = l
	}
	return l
}

// mark records that l's peer was heard from now, and pushes its ping
// timer back (see pingTimer).
func (h *heard) mark(l *lastHeard) {
	now := int64(time.Since(h.origin))
	l.at.Store(now)
	if p := l.pinger.Load(); p != nil {
		if last := p.pushed.Load(); now-last >= int64(p.every/4) && p.pushed.CompareAndSwap(last, now) {
			p.t.Reset(p.every)
		}
	}
}

// quiet is how long l's peer has been silent (since the Network started,
// if it never spoke).
func (h *heard) quiet(l *lastHeard) time.Duration {
	return time.Since(h.origin) - time.Duration(l.at.Load())
}
