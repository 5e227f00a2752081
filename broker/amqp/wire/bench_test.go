package wire

import (
	"fmt"
	"testing"
)

// BenchmarkReadFrameDecodePublish measures the publish hot path: read a
// basic.publish method frame from a buffered stream and decode it.
func BenchmarkReadFrameDecodePublish(b *testing.B) {
	frame := AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "amq.direct", RoutingKey: "perf-test.routing.key", Mandatory: true})
	r := NewReader(&loopReader{data: frame}, 64<<10)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		f, err := r.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeMethod(f.Payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadMessage reads a whole published message (method, header,
// body) and extracts the delivery mode with the fast path.
func BenchmarkReadMessage(b *testing.B) {
	msg := message(nil, 1, make([]byte, 1024), 131072)
	r := NewReader(&loopReader{data: msg}, 64<<10)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		f, _ := r.ReadFrame()
		if _, err := DecodeMethod(f.Payload); err != nil {
			b.Fatal(err)
		}
		f, _ = r.ReadFrame()
		h, err := DecodeContentHeader(f.Payload)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := PropertiesDeliveryMode(h.Properties); err != nil {
			b.Fatal(err)
		}
		if _, err := r.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendBodyFrames(b *testing.B) {
	for _, size := range []int{100, 4096, 1 << 20} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			body := make([]byte, size)
			buf := make([]byte, 0, 2*size+1024)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendBodyFrames(buf[:0], 1, body, 131072)
			}
		})
	}
}

// BenchmarkAppendDelivery encodes what a consumer receives per message:
// basic.deliver, the forwarded content header and one body frame.
func BenchmarkAppendDelivery(b *testing.B) {
	props := (&Properties{ContentType: "application/octet-stream", DeliveryMode: 2}).Append(nil)
	body := make([]byte, 1024)
	buf := make([]byte, 0, 4096)
	d := &BasicDeliver{ConsumerTag: "amq.ctag-0123456789", Exchange: "amq.direct", RoutingKey: "key"}
	b.ReportAllocs()
	for b.Loop() {
		d.DeliveryTag++
		buf = AppendMethodFrame(buf[:0], 1, d)
		buf = AppendHeaderFrame(buf, 1, ClassBasic, uint64(len(body)), props)
		buf = AppendBodyFrames(buf, 1, body, 131072)
	}
}
