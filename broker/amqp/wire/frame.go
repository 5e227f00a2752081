package wire

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/warrenmq/warren/broker/framebuf"
)

// ProtocolHeader is the 8-byte header a client sends before its first
// frame, and the server answers with when it rejects a header.
const ProtocolHeader = "AMQP\x00\x00\x09\x01"

// FrameOverhead is the size of a frame beyond its payload: type (1),
// channel (2), size (4) and the frame-end octet (1).
const FrameOverhead = 8

// Frame is one AMQP frame.
type Frame struct {
	Type    uint8
	Channel uint16
	Payload []byte
}

// AppendMethodFrame appends a method frame carrying m on channel to b.
func AppendMethodFrame(b []byte, channel uint16, m Method) []byte {
	start := len(b)
	b = append(b, FrameMethod, byte(channel>>8), byte(channel), 0, 0, 0, 0)
	b = m.Append(b)
	binary.BigEndian.PutUint32(b[start+3:], uint32(len(b)-start-7))
	return append(b, FrameEnd)
}

// AppendHeaderFrame appends a content header frame to b. props is the raw
// property list (flags and values) as found in ContentHeader.Properties or
// produced by Properties.Append; an empty props encodes "no properties".
// The weight is always zero.
func AppendHeaderFrame(b []byte, channel uint16, classID uint16, bodySize uint64, props []byte) []byte {
	n := 12 + len(props)
	if len(props) == 0 {
		n += 2
	}
	b = append(b, FrameHeader, byte(channel>>8), byte(channel))
	b = appendLong(b, uint32(n))
	b = appendShort(b, classID)
	b = append(b, 0, 0)
	b = appendLonglong(b, bodySize)
	if len(props) == 0 {
		b = append(b, 0, 0)
	} else {
		b = append(b, props...)
	}
	return append(b, FrameEnd)
}

// AppendBodyFrames appends body to b as content body frames of at most
// frameMax bytes each, overhead included. frameMax 0 (or any value not
// above FrameOverhead) means no limit: one frame. An empty body produces no
// frame.
func AppendBodyFrames(b []byte, channel uint16, body []byte, frameMax uint32) []byte {
	if len(body) == 0 {
		return b
	}
	chunk := len(body)
	if frameMax > FrameOverhead && uint64(frameMax-FrameOverhead) < uint64(chunk) {
		chunk = int(frameMax - FrameOverhead)
	}
	frames := (len(body) + chunk - 1) / chunk
	b = growBytes(b, len(body)+frames*FrameOverhead)
	for len(body) > 0 {
		n := min(chunk, len(body))
		b = append(b, FrameBody, byte(channel>>8), byte(channel))
		b = appendLong(b, uint32(n))
		b = append(b, body[:n]...)
		b = append(b, FrameEnd)
		body = body[n:]
	}
	return b
}

// AppendHeartbeat appends a heartbeat frame (channel 0, empty payload).
func AppendHeartbeat(b []byte) []byte {
	return append(b, FrameHeartbeat, 0, 0, 0, 0, 0, 0, FrameEnd)
}

func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n+cap(b))
	copy(nb, b)
	return nb
}

// Reader reads frames from a byte stream through its own buffer, which
// grows only with bytes that arrive (framebuf). It is not safe for
// concurrent use.
type Reader struct {
	b        framebuf.Buffer
	maxFrame uint32
}

// NewReader returns a Reader over r with a buffer of bufSize bytes
// (at least FrameMinSize). Frames larger than the buffer grow it.
func NewReader(r io.Reader, bufSize int) *Reader {
	return &Reader{b: framebuf.New(r, max(bufSize, FrameMinSize))}
}

// Grow makes the buffer at least n bytes, so that a trusted peer's frames
// are read with few system calls (a connection starts small and grows it
// once the handshake is done).
func (r *Reader) Grow(n int) { r.b.Grow(n) }

// SetMaxFrameSize sets the largest frame ReadFrame accepts, overhead
// included (the negotiated frame-max). 0 means no limit.
func (r *Reader) SetMaxFrameSize(n uint32) { r.maxFrame = n }

// MaxFrameSize returns the limit set with SetMaxFrameSize.
func (r *Reader) MaxFrameSize() uint32 { return r.maxFrame }

// Buffered returns the number of bytes read from the underlying reader
// but not yet returned as frames. A connection can use it to handle every
// frame already received before flushing its replies.
func (r *Reader) Buffered() int { return r.b.Buffered() }

// NextMethod reports the class and method ids of the next frame if it is
// a method frame received whole (so ReadFrame returns it without reading
// from the underlying reader); ok is false otherwise. It reads nothing.
func (r *Reader) NextMethod() (class, method uint16, ok bool) {
	b := r.b.Unread()
	if len(b) < 7 || b[0] != FrameMethod {
		return 0, 0, false
	}
	size := int(binary.BigEndian.Uint32(b[3:]))
	if size < 4 || len(b) < 7+size+1 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(b[7:]), binary.BigEndian.Uint16(b[9:]), true
}

// ReadProtocolHeader reads the 8-byte protocol header. It returns whatever
// 8 bytes arrived; the caller compares them with ProtocolHeader.
func (r *Reader) ReadProtocolHeader() ([8]byte, error) {
	var h [8]byte
	if err := r.b.Fill(8); err != nil {
		return h, fmt.Errorf("read protocol header: %w", err)
	}
	copy(h[:], r.b.Next(8))
	return h, nil
}

// ReadFrame reads the next frame. Its Payload aliases the reader's buffer
// and is valid until the next call. Errors: ErrFrameTooLarge,
// ErrBadFrameType, ErrBadFrameEnd, io.EOF at a frame boundary,
// io.ErrUnexpectedEOF inside a frame, or the underlying reader's error.
func (r *Reader) ReadFrame() (Frame, error) {
	if err := r.b.Fill(7); err != nil {
		return Frame{}, err
	}
	h := r.b.Unread()
	typ := h[0]
	channel := binary.BigEndian.Uint16(h[1:])
	size := binary.BigEndian.Uint32(h[3:])
	switch typ {
	case FrameMethod, FrameHeader, FrameBody, FrameHeartbeat:
	default:
		return Frame{}, fmt.Errorf("%w: type %d on channel %d", ErrBadFrameType, typ, channel)
	}
	if total := uint64(size) + FrameOverhead; r.maxFrame != 0 && total > uint64(r.maxFrame) {
		return Frame{}, fmt.Errorf("%w: %d bytes on channel %d exceeds frame-max %d", ErrFrameTooLarge, total, channel, r.maxFrame)
	}
	if uint64(size) > uint64(maxInt-FrameOverhead) {
		return Frame{}, fmt.Errorf("%w: %d bytes on channel %d", ErrFrameTooLarge, size, channel)
	}
	n := int(size) + FrameOverhead
	if err := r.b.Fill(n); err != nil {
		return Frame{}, err
	}
	if end := r.b.Unread()[n-1]; end != FrameEnd {
		return Frame{}, fmt.Errorf("%w: %#02x after %d-byte frame on channel %d", ErrBadFrameEnd, end, size, channel)
	}
	f := r.b.Next(n)
	return Frame{Type: typ, Channel: channel, Payload: f[7 : n-1 : n-1]}, nil
}

const maxInt = int(^uint(0) >> 1)
