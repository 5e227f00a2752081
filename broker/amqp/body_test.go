package amqp

import (
	"bytes"
	"testing"
)

// FuzzAppendBody: body frames of any sizes assemble the declared body
// exactly, refuse bytes past it, and never hold more than twice what
// arrived (nor more than the declared size).
func FuzzAppendBody(f *testing.F) {
	f.Add(uint64(10), []byte{10})
	f.Add(uint64(1<<63), []byte{1, 2, 3})
	f.Add(uint64(300), []byte{100, 200, 0, 50})
	f.Fuzz(func(t *testing.T, size uint64, frames []byte) {
		if size&1 == 0 { // small sizes, so that frames reach and pass them
			size %= 1 << 16
		}
		var body, want []byte
		for i, n := range frames {
			payload := bytes.Repeat([]byte{byte(i)}, int(n))
			got, ok := appendBody(body, payload, size)
			if fits := uint64(len(body)+len(payload)) <= size; ok != fits {
				t.Fatalf("frame %d of %d bytes after %d of %d: ok=%v", i, n, len(body), size, ok)
			}
			if !ok {
				if !bytes.Equal(got, body) {
					t.Fatal("a refused frame changed the body")
				}
				continue
			}
			body, want = got, append(want, payload...)
			if !bytes.Equal(body, want) {
				t.Fatalf("body differs after frame %d", i)
			}
			if uint64(cap(body)) > size || (len(body) > 0 && cap(body) > 2*len(body)) {
				t.Fatalf("holds %d bytes for %d received of %d declared", cap(body), len(body), size)
			}
		}
	})
}

func TestAppendBodyOneFrameOneAllocation(t *testing.T) {
	payload := make([]byte, 1000)
	allocs := testing.AllocsPerRun(100, func() {
		if b, ok := appendBody(nil, payload, 1000); !ok || len(b) != 1000 {
			t.Fatal("not appended")
		}
	})
	if allocs != 1 {
		t.Fatalf("%v allocations for a one-frame body, want 1", allocs)
	}
}
