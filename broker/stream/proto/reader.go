package proto

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Reader reads frames from a byte stream through its own buffer. The
// buffer starts small and grows with the bytes that actually arrive
// (doubling, up to the frame being read), never with the size a frame
// declares: a peer that announces a large frame and sends nothing costs
// nothing. ReadFrame returns the body in place, without a copy. A Reader
// belongs to one goroutine.
type Reader struct {
	rd   io.Reader
	buf  []byte
	r, w int // buf[r:w] holds unread bytes
	max  uint32
}

// minReaderBuffer is the smallest buffer a Reader starts with.
const minReaderBuffer = 64

// NewReader returns a Reader over rd whose buffer starts at size bytes.
func NewReader(rd io.Reader, size int) *Reader {
	return &Reader{rd: rd, buf: make([]byte, max(size, minReaderBuffer))}
}

// SetMaxFrameSize bounds the body size ReadFrame accepts (0: 2^31); a
// larger frame fails with ErrFrameTooLarge before any of its body is read.
func (r *Reader) SetMaxFrameSize(n uint32) { r.max = n }

// Grow makes the buffer at least n bytes, so that a trusted peer's frames
// are read with few system calls.
func (r *Reader) Grow(n int) {
	if n > len(r.buf) {
		nb := make([]byte, n)
		r.w = copy(nb, r.buf[r.r:r.w])
		r.r, r.buf = 0, nb
	}
}

// Buffered returns the number of bytes read but not yet returned.
func (r *Reader) Buffered() int { return r.w - r.r }

// FrameBuffered reports whether a whole frame is buffered, so that
// ReadFrame returns it without reading from the underlying reader.
func (r *Reader) FrameBuffered() bool {
	b := r.buf[r.r:r.w]
	return len(b) >= 4 && uint64(len(b)) >= 4+uint64(binary.BigEndian.Uint32(b))
}

// ReadFrame reads one frame and returns its body (key, version and
// fields, without the size prefix). The body aliases the reader's buffer
// and is valid until the next call. Errors: ErrFrameTooLarge,
// ErrMalformed (a size below key and version), io.EOF at a frame
// boundary, io.ErrUnexpectedEOF inside a frame, or the underlying
// reader's error (bytes already read stay buffered: a read that timed out
// can be retried).
func (r *Reader) ReadFrame() ([]byte, error) {
	if err := r.fill(4); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(r.buf[r.r:])
	if (r.max != 0 && n > r.max) || n > 1<<31 {
		return nil, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	if n < 4 {
		return nil, fmt.Errorf("%w: frame of %d bytes has no key and version", ErrMalformed, n)
	}
	end := 4 + int(n)
	if err := r.fill(end); err != nil {
		return nil, err
	}
	body := r.buf[r.r+4 : r.r+end : r.r+end]
	r.r += end
	return body, nil
}

// fill makes at least n unread bytes available, compacting the buffer
// and growing it only when it is full of received bytes.
func (r *Reader) fill(n int) error {
	for empty := 0; r.w-r.r < n; {
		if len(r.buf)-r.r < n {
			if r.r > 0 {
				r.w = copy(r.buf, r.buf[r.r:r.w])
				r.r = 0
			}
			if len(r.buf) < n && r.w == len(r.buf) {
				nb := make([]byte, min(n, 2*len(r.buf)))
				copy(nb, r.buf[:r.w])
				r.buf = nb
			}
		}
		m, err := r.rd.Read(r.buf[r.w:])
		r.w += m
		if m == 0 && err == nil {
			if empty++; empty >= 100 {
				return io.ErrNoProgress
			}
		}
		if err != nil && r.w-r.r < n {
			if err == io.EOF && r.w > r.r {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}
