package stream

import (
	"sync"

	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/store/streamlog"
	"github.com/warrenmq/warren/broker/vhost"
)

// registry holds the server's state per open stream, keyed by the stream
// queue (a stream deleted and declared again gets new state), and the
// read-ahead setting per vhost.
type registry struct {
	srv *Server
	mu  sync.Mutex
	m   map[*queue.Stream]*streamState
	ra  map[*vhost.Vhost]*streamlog.ReadAhead
}

func (r *registry) init(s *Server) {
	r.srv = s
	r.m = map[*queue.Stream]*streamState{}
	r.ra = map[*vhost.Vhost]*streamlog.ReadAhead{}
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

// readAhead returns the vhost's read-ahead setting, refreshed from its
// current storage settings (readers consult it at every read).
func (r *registry) readAhead(vh *vhost.Vhost) *streamlog.ReadAhead {
	s := vh.Settings()
	r.mu.Lock()
	ra, ok := r.ra[vh]
	if !ok {
		ra = streamlog.NewReadAhead(s.StreamReadAhead, s.StreamReadAheadLimit)
		r.ra[vh] = ra
	}
	r.mu.Unlock()
	ra.Set(s.StreamReadAhead, s.StreamReadAheadLimit)
	return ra
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
