// Package framebuf is the read buffer under the protocol codecs' frame
// readers (AMQP 0.9.1 and the stream protocol): it holds what the peer sent
// and not yet consumed, and grows only with bytes that actually arrive
// (doubling, up to the frame being read), never with the size a frame
// declares, so a peer that announces a large frame and sends nothing costs
// nothing. Frames are returned in place, without a copy.
//
// A Buffer belongs to one goroutine. It imports nothing of Warren's.
package framebuf

import "io"

// Buffer reads from an io.Reader through its own buffer.
type Buffer struct {
	rd   io.Reader
	buf  []byte
	r, w int // buf[r:w] holds unread bytes
}

// New returns a Buffer over rd whose buffer starts at size bytes.
func New(rd io.Reader, size int) Buffer {
	return Buffer{rd: rd, buf: make([]byte, size)}
}

// Grow makes the buffer at least n bytes, so that a trusted peer's frames
// are read with few system calls.
func (b *Buffer) Grow(n int) {
	if n > len(b.buf) {
		nb := make([]byte, n)
		b.w = copy(nb, b.buf[b.r:b.w])
		b.r, b.buf = 0, nb
	}
}

// Buffered returns the number of bytes read but not yet consumed.
func (b *Buffer) Buffered() int { return b.w - b.r }

// Size returns the buffer's size, what the Buffer holds in memory.
func (b *Buffer) Size() int { return len(b.buf) }

// Unread returns the bytes read but not yet consumed; it aliases the
// buffer and is valid until the next Fill.
func (b *Buffer) Unread() []byte { return b.buf[b.r:b.w] }

// Next consumes n bytes, which Fill made available, and returns them (a
// slice of the buffer with no room to append, valid until the next Fill).
func (b *Buffer) Next(n int) []byte {
	p := b.buf[b.r : b.r+n : b.r+n]
	b.r += n
	return p
}

// Fill makes at least n unread bytes available, compacting the buffer and
// growing it only when it is full of received bytes. Errors: io.EOF when
// the reader ends with nothing unread, io.ErrUnexpectedEOF when it ends
// with fewer than n bytes, io.ErrNoProgress after 100 empty reads, or the
// reader's error. Like bufio, an error is reported once and the bytes
// already read stay buffered, so a read that timed out can be retried.
func (b *Buffer) Fill(n int) error {
	for empty := 0; b.w-b.r < n; {
		if len(b.buf)-b.r < n {
			if b.r > 0 {
				b.w = copy(b.buf, b.buf[b.r:b.w])
				b.r = 0
			}
			if len(b.buf) < n && b.w == len(b.buf) {
				nb := make([]byte, min(n, max(2*len(b.buf), 64)))
				copy(nb, b.buf[:b.w])
				b.buf = nb
			}
		}
		m, err := b.rd.Read(b.buf[b.w:])
		b.w += m
		if m == 0 && err == nil {
			if empty++; empty >= 100 {
				return io.ErrNoProgress
			}
		}
		if err != nil && b.w-b.r < n {
			if err == io.EOF && b.w > b.r {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}
