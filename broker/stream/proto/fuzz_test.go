package proto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"reflect"
	"testing"
)

// FuzzDecode: any body decodes or fails without panicking, and what decodes
// re-encodes to something that decodes to the same command.
func FuzzDecode(f *testing.F) {
	for _, c := range samples() {
		f.Add(Encode(nil, c)[4:])
	}
	for _, body := range clientBodies() {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := Decode(body)
		var p Publish
		perr := DecodePublish(body, &p)
		if err != nil {
			if key, _, _ := Header(body); key == KeyPublish && perr == nil {
				t.Fatalf("DecodePublish accepts what Decode refuses: %v", err)
			}
			return
		}
		again, err := Decode(Encode(nil, c)[4:])
		if err != nil {
			t.Fatalf("%T: re-encoded frame does not decode: %v", c, err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("%T: round trip changed\n%#v\n%#v", c, c, again)
		}
	})
}

// chunkReader returns at most n bytes per Read, and counts what it gave.
type chunkReader struct {
	b    []byte
	n    int
	gave int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b, c.gave = c.b[k:], c.gave+k
	return k, nil
}

// FuzzReader: the server's frame reader splits any byte stream, arriving
// in any pieces, into the frames ReadFrame finds, refuses the same ones,
// and never holds more than twice the bytes that arrived, whatever size a
// frame declares.
func FuzzReader(f *testing.F) {
	var stream []byte
	for _, c := range samples() {
		stream = Encode(stream, c)
	}
	f.Add(uint32(0), uint8(7), stream)
	f.Add(uint32(8192), uint8(100), append(binary.BigEndian.AppendUint32(nil, 1<<20), 0, 17, 0, 1))
	f.Add(uint32(0), uint8(1), []byte{0, 0, 0, 2, 0, 1})
	f.Fuzz(func(t *testing.T, max uint32, chunk uint8, stream []byte) {
		src := &chunkReader{b: stream, n: int(chunk)%64 + 1}
		r := NewReader(src, 0)
		r.SetMaxFrameSize(max)
		ref := bufio.NewReader(bytes.NewReader(stream))
		for {
			body, err := r.ReadFrame()
			want, werr := ReadFrame(ref, nil, max)
			if (err == nil) != (werr == nil) || !bytes.Equal(body, want) {
				t.Fatalf("Reader: %d bytes, %v; ReadFrame: %d bytes, %v", len(body), err, len(want), werr)
			}
			if size := r.b.Size(); size > minReaderBuffer && size > 2*src.gave {
				t.Fatalf("buffer of %d bytes after %d arrived", size, src.gave)
			}
			if err != nil {
				return
			}
			_, _ = Decode(body)
		}
	})
}
