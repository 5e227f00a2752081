package amqp10

import (
	"testing"

	"github.com/warrenmq/warren/broker/amqp/wire"
)

// BenchmarkDecodeToAMQP091 is an AMQP stream consumer's per-message work:
// decode the stored AMQP 1.0 message and encode 0.9.1 properties.
func BenchmarkDecodeToAMQP091(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    wire.Properties
	}{
		{"bare", wire.Properties{}},
		{"persistent-headers", wire.Properties{DeliveryMode: 2, ContentType: "text/plain", Headers: wire.Table{"a": "b"}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			enc := AppendFromAMQP091(nil, &tc.p, "", "q", make([]byte, 12))
			var props []byte
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				m, err := Decode(enc)
				if err != nil {
					b.Fatal(err)
				}
				if m.Props.Headers == nil {
					m.Props.Headers = wire.Table{}
				}
				m.Props.Headers["x-stream-offset"] = int64(i)
				props = m.Props.Append(props[:0])
			}
		})
	}
}

func BenchmarkEncodeFromAMQP091(b *testing.B) {
	p := wire.Properties{DeliveryMode: 2}
	body := make([]byte, 12)
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = AppendFromAMQP091(buf[:0], &p, "", "q", body)
	}
}

func BenchmarkDecodeInto(b *testing.B) {
	enc := AppendFromAMQP091(nil, &wire.Properties{}, "", "q", make([]byte, 12))
	var m Message
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := DecodeInto(&m, enc); err != nil {
			b.Fatal(err)
		}
	}
}
