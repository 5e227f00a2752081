package stream

// sectionsMax bounds the file sections a subscription has queued on its
// connection's output and not yet seen sent: enough that the writer's
// sendfile of one large chunk overlaps the reader finding the next ones,
// few enough that a slow socket holds little back.
const sectionsMax = 8

// sectionsInFlight tracks a subscription's queued file sections, oldest
// first. Only the delivery goroutine uses it (the reader calls waitAll
// from that goroutine before it closes a segment file), so it has no lock.
type sectionsInFlight struct {
	pending []chan error
	failed  bool
}

// add tracks a queued section, first waiting for the oldest while
// sectionsMax are in flight. It reports false once a section failed (the
// connection's output is then closed: delivery stops).
func (s *sectionsInFlight) add(sent chan error) bool {
	for len(s.pending) >= sectionsMax && !s.failed {
		s.waitOldest()
	}
	s.pending = append(s.pending, sent)
	return !s.failed
}

// waitAll returns when every tracked section is sent or failed: the
// segment file they read from may then be closed.
func (s *sectionsInFlight) waitAll() {
	for len(s.pending) > 0 {
		s.waitOldest()
	}
}

func (s *sectionsInFlight) waitOldest() {
	if err := <-s.pending[0]; err != nil {
		s.failed = true
	}
	s.pending[0] = nil
	s.pending = s.pending[1:]
}
