package stream_test

import (
	"bufio"
	"encoding/binary"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// The malformed-frame probes of the stream protocol (make test-security).

// heapObjects is the process's live heap after a collection (the broker
// runs in this process).
func heapObjects() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapGrewLittle fails the test if the heap grew by more than 16 MiB
// since before, for conns connections: a few KiB each at most.
func heapGrewLittle(t *testing.T, before uint64, conns int) {
	t.Helper()
	grown := int64(heapObjects()) - int64(before)
	t.Logf("heap grew by %d KiB for %d unauthenticated connections", grown>>10, conns)
	if grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB for %d unauthenticated connections", grown>>20, conns)
	}
}

// frameStart is the start of a peer properties frame that declares a body
// of size bytes and brings only its key and version.
func frameStart(size uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, size)
	b = binary.BigEndian.AppendUint16(b, proto.KeyPeerProperties)
	return binary.BigEndian.AppendUint16(b, 1)
}

func TestProbeUnauthenticatedFramesCostOnlyWhatArrives(t *testing.T) {
	const conns = 500
	n := brokertest.Start(t)
	dial := func(t *testing.T, first []byte) []net.Conn {
		ncs := make([]net.Conn, conns)
		for i := range ncs {
			nc, err := net.Dial("tcp", n.StreamAddr())
			must(t, err)
			t.Cleanup(func() { _ = nc.Close() })
			_, err = nc.Write(first)
			must(t, err)
			ncs[i] = nc
		}
		return ncs
	}
	t.Run("1 MiB frames are refused before authentication", func(t *testing.T) {
		before := heapObjects()
		for _, nc := range dial(t, frameStart(1<<20)) {
			_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			body, err := proto.ReadFrame(bufio.NewReader(nc), nil, 0)
			must(t, err)
			c, err := proto.Decode(body)
			must(t, err)
			if cl, ok := c.(*proto.Close); !ok || cl.Code != proto.CodeFrameTooLarge {
				t.Fatalf("got %#v, want close with frame too large", c)
			}
		}
		heapGrewLittle(t, before, conns)
	})
	t.Run("frames under the initial frame max, trickled", func(t *testing.T) {
		eventually.True(t, 10*time.Second, "earlier connections closed", func() bool { return n.Stream.ConnectionCount() == 0 })
		// An 8000-byte peer properties frame, of which 108 bytes come.
		frame := proto.Encode(nil, &proto.PeerProperties{CorrelationID: 1, Properties: map[string]string{"k": strings.Repeat("v", 7983)}})
		if len(frame) != 4+8000 {
			t.Fatalf("frame of %d bytes", len(frame))
		}
		before := heapObjects()
		ncs := dial(t, frame[:108])
		eventually.True(t, 10*time.Second, "connections accepted", func() bool { return n.Stream.ConnectionCount() == conns })
		heapGrewLittle(t, before, conns)
		// They are served on: the rest of the frame completes it.
		r := &rawConn{t: t, nc: ncs[0], br: bufio.NewReader(ncs[0])}
		r.write(frame[108:])
		if pp, ok := r.recv().(*proto.PeerPropertiesResponse); !ok || pp.Code != proto.CodeOK {
			t.Fatalf("peer properties: %#v", pp)
		}
	})
	// Nothing of this touched a client that authenticated.
	r := dialRaw(t, n)
	r.open()
}
