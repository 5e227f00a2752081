package proto

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/warrenmq/warren/broker/framebuf"
)

// Reader reads frames from a byte stream through its own buffer, which
// grows only with bytes that arrive (framebuf): a peer that announces a
// large frame and sends nothing costs nothing. ReadFrame returns the body
// in place, without a copy. A Reader belongs to one goroutine.
type Reader struct {
	b   framebuf.Buffer
	max uint32
}

// minReaderBuffer is the smallest buffer a Reader starts with.
const minReaderBuffer = 64

// NewReader returns a Reader over rd whose buffer starts at size bytes.
func NewReader(rd io.Reader, size int) *Reader {
	return &Reader{b: framebuf.New(rd, max(size, minReaderBuffer))}
}

// SetMaxFrameSize bounds the body size ReadFrame accepts (0: 2^31); a
// larger frame fails with ErrFrameTooLarge before any of its body is read.
func (r *Reader) SetMaxFrameSize(n uint32) { r.max = n }

// Grow makes the buffer at least n bytes, so that a trusted peer's frames
// are read with few system calls.
func (r *Reader) Grow(n int) { r.b.Grow(n) }

// Buffered returns the number of bytes read but not yet returned.
func (r *Reader) Buffered() int { return r.b.Buffered() }

// FrameBuffered reports whether a whole frame is buffered, so that
// ReadFrame returns it without reading from the underlying reader.
func (r *Reader) FrameBuffered() bool {
	b := r.b.Unread()
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
	if err := r.b.Fill(4); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(r.b.Unread())
	if (r.max != 0 && n > r.max) || n > 1<<31 {
		return nil, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	if n < 4 {
		return nil, fmt.Errorf("%w: frame of %d bytes has no key and version", ErrMalformed, n)
	}
	end := 4 + int(n)
	if err := r.b.Fill(end); err != nil {
		return nil, err
	}
	return r.b.Next(end)[4:], nil
}
