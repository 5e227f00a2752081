package stream

import (
	"sync"

	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/store/streamlog"
	"github.com/warrenmq/warren/broker/vhost"
)

// registry holds the server's state per open stream, keyed by the stream
// queue (a stream deleted and declared again gets new state).
type registry struct {
	srv *Server
	mu  sync.Mutex
	m   map[*queue.Stream]*streamState
}

func (r *registry) init(s *Server) {
	r.srv = s
	r.m = map[*queue.Stream]*streamState{}
}

// get returns the state of a stream, creating it (and its deletion
// watcher) on first use.
func (r *registry) get(vh *vhost.Vhost, name string, q *queue.Stream) *streamState {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.m[q]; ok {
		return st
	}
	st := newStreamState(r.srv, vh.Name(), name, q)
	r.m[q] = st
	go func() {
		<-q.Deleted()
		r.mu.Lock()
		delete(r.m, q)
		r.mu.Unlock()
		st.gone()
	}()
	return st
}

// readAhead returns the vhost's read-ahead setting (shared by its stream
// readers, changed at runtime by the vhost).
func (r *registry) readAhead(vh *vhost.Vhost) *streamlog.ReadAhead {
	return vh.StreamReadAhead()
}

// stopAll flushes every stream's pending batch (server shutdown).
func (r *registry) stopAll() {
	r.mu.Lock()
	sts := make([]*streamState, 0, len(r.m))
	for _, st := range r.m {
		sts = append(sts, st)
	}
	r.mu.Unlock()
	for _, st := range sts {
		st.flush()
	}
}
