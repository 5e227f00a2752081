package amqp

// appendBody adds a body frame's payload to the body assembled so far,
// whose declared size is size (at most the max message size, checked at
// the header). It reports false, changing nothing, if the payload would
// take the body past size.
//
// The body grows with the bytes that arrived, never ahead of them: the
// buffer holds at most twice what was received (doubling keeps copying
// linear), and never more than size. A body that comes in one frame, as
// small messages do, costs exactly one allocation of its size.
func appendBody(body, payload []byte, size uint64) ([]byte, bool) {
	n := uint64(len(body)) + uint64(len(payload))
	if n > size {
		return body, false
	}
	if int(n) > cap(body) {
		nb := make([]byte, len(body), min(max(n, 2*uint64(cap(body))), size))
		copy(nb, body)
		body = nb
	}
	return append(body, payload...), true
}
