package transport

import "sync"

// watchers fans a Network's peer up/down events out to the functions given
// to Watch: events are queued and delivered one at a time, in order, by one
// goroutine that runs while there are events (so no caller of emit ever
// runs a watcher, and no lock of the Network is held while one runs).
type watchers struct {
	mu      sync.Mutex
	next    int
	fns     map[int]func(node string, up bool)
	queue   []peerEvent
	running bool
}

type peerEvent struct {
	node string
	up   bool
}

func (w *watchers) add(fn func(node string, up bool)) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(string, bool){}
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

func (w *watchers) emit(node string, up bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.fns) == 0 {
		return
	}
	w.queue = append(w.queue, peerEvent{node, up})
	if !w.running {
		w.running = true
		go w.drain()
	}
}

func (w *watchers) drain() {
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		ev := w.queue[0]
		w.queue = w.queue[1:]
		fns := make([]func(string, bool), 0, len(w.fns))
		for _, fn := range w.fns {
			fns = append(fns, fn)
		}
		w.mu.Unlock()
		for _, fn := range fns {
			fn(ev.node, ev.up)
		}
	}
}
