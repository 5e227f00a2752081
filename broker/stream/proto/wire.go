package proto

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Errors returned by the decoders.
var (
	// ErrMalformed is a frame whose fields do not fit its size or hold
	// impossible values.
	ErrMalformed = errors.New("stream proto: malformed frame")
	// ErrUnknownCommand is a well-framed command with a key or version this
	// codec does not know.
	ErrUnknownCommand = errors.New("stream proto: unknown command")
	// ErrFrameTooLarge is a frame larger than the negotiated maximum.
	ErrFrameTooLarge = errors.New("stream proto: frame too large")
)

// ReadFrame reads one frame and returns its body (key, version and fields,
// without the size prefix). The body aliases buf when it fits; otherwise a
// new slice grows as the body's bytes arrive, never ahead of them. max
// bounds the body size (0: no bound beyond 2^31). A server reads with
// Reader, which needs no bufio.Reader under it.
func ReadFrame(r *bufio.Reader, buf []byte, max uint32) ([]byte, error) {
	// Peek, not ReadFull into a local array: that array would escape to
	// the heap, one allocation per frame.
	sz, err := r.Peek(4)
	if err != nil {
		if len(sz) > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(sz)
	_, _ = r.Discard(4)
	if (max != 0 && n > max) || n > 1<<31 {
		return nil, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	if n < 4 {
		return nil, fmt.Errorf("%w: frame of %d bytes has no key and version", ErrMalformed, n)
	}
	buf = buf[:0]
	for len(buf) < int(n) {
		if len(buf) == cap(buf) {
			grow := cap(buf) // double what arrived, from 4 KiB
			if grow < 4096 {
				grow = 4096
			}
			buf = slices.Grow(buf, min(int(n)-len(buf), grow))
		}
		m, err := io.ReadFull(r, buf[len(buf):min(cap(buf), int(n))])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// reader decodes big-endian fields with a sticky error: after the first short
// read every getter returns zero values and err stays set.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: short %s", ErrMalformed, what)
	}
	r.b = nil
}

func (r *reader) u8() uint8 {
	if len(r.b) < 1 {
		r.fail("uint8")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if len(r.b) < 2 {
		r.fail("uint16")
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.fail("uint32")
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail("uint64")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || len(r.b) < n {
		r.fail("bytes")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// str reads a string: int16 length (-1 is null, read as "") and bytes.
func (r *reader) str() string {
	n := int16(r.u16())
	if n < 0 {
		if n != -1 {
			r.fail("string (negative length)")
		}
		return ""
	}
	return string(r.bytes(int(n)))
}

// blob reads int32 length-prefixed bytes (-1 is null).
func (r *reader) blob() []byte {
	n := int32(r.u32())
	if n < 0 {
		if n != -1 {
			r.fail("bytes (negative length)")
		}
		return nil
	}
	return r.bytes(int(n))
}

// count reads an int32 array length, checking that each element needs at
// least min bytes so a hostile count cannot make us allocate.
func (r *reader) count(min int) int {
	n := int32(r.u32())
	if n < 0 || (min > 0 && int(n) > len(r.b)/min) {
		r.fail("array (impossible length)")
		return 0
	}
	return int(n)
}

func (r *reader) strs() []string {
	n := r.count(2)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.str()
	}
	return out
}

func (r *reader) strMap() map[string]string {
	n := r.count(4)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.str()
		m[k] = r.str()
	}
	return m
}

// end fails if bytes remain: every command must use its whole frame.
func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	return r.err
}

func appendU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendStr(b []byte, s string) []byte {
	b = appendU16(b, uint16(len(s)))
	return append(b, s...)
}

func appendBlob(b []byte, v []byte) []byte {
	if v == nil {
		return appendU32(b, 0xFFFFFFFF)
	}
	b = appendU32(b, uint32(len(v)))
	return append(b, v...)
}

func appendStrs(b []byte, ss []string) []byte {
	b = appendU32(b, uint32(len(ss)))
	for _, s := range ss {
		b = appendStr(b, s)
	}
	return b
}

// appendStrMap writes a map in sorted key order so encodings are stable.
func appendStrMap(b []byte, m map[string]string) []byte {
	b = appendU32(b, uint32(len(m)))
	for _, k := range sortedKeys(m) {
		b = appendStr(b, k)
		b = appendStr(b, m[k])
	}
	return b
}

// beginFrame appends a size placeholder, key and version; finishFrame fills
// in the size.
func beginFrame(b []byte, key, version uint16) ([]byte, int) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendU16(b, key)
	b = appendU16(b, version)
	return b, start
}

func finishFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}
