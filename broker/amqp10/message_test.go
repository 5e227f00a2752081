package amqp10

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/warrenmq/warren/broker/amqp/wire"
)

func TestRoundTripAMQP091(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    wire.Properties
		body []byte
	}{
		{"empty", wire.Properties{}, nil},
		{"persistent", wire.Properties{DeliveryMode: 2, Priority: 5}, []byte("hello")},
		{"all", wire.Properties{
			ContentType: "text/plain", ContentEncoding: "gzip", DeliveryMode: 1, Priority: 9,
			CorrelationId: "corr", ReplyTo: "amq.rabbitmq.reply-to", Expiration: "60000",
			MessageId: "m-1", Timestamp: 1_700_000_000, Type: "kind", UserId: "guest", AppId: "app", ClusterId: "c",
			Headers: wire.Table{
				"s": "str", "i": int32(-7), "l": int64(1) << 40, "b": true, "f": 1.5, "x": []byte{1, 2},
				"nested": wire.Table{"a": int32(1)}, "arr": []any{"a", int32(2)},
			},
		}, bytes.Repeat([]byte("x"), 300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := AppendFromAMQP091(nil, &tc.p, "ex", "rk", tc.body)
			m, err := Decode(enc)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if m.Exchange != "ex" || m.RoutingKey != "rk" || !bytes.Equal(m.Body, tc.body) {
				t.Fatalf("got %q %q body %q", m.Exchange, m.RoutingKey, m.Body)
			}
			want := tc.p
			if want.DeliveryMode == 0 {
				want.DeliveryMode = 1
			}
			want.Expiration = "" // streams do not expire messages
			got := m.Props
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("properties\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// A message as the stream clients build it: properties, application
// properties and an amqp-value string body, with symbol descriptors too.
func TestDecodeClientMessage(t *testing.T) {
	var b []byte
	b = appendDescriptor(b, secProperties)
	b, ps := beginCompound(b, tList32)
	b = append(b, tSmallUlong, 42) // message-id ulong
	b = append(b, tNull, tNull, tNull, tNull)
	b = append(b, tUUID)
	b = append(b, bytes.Repeat([]byte{0xab}, 16)...)
	b = appendSymbol(b, "application/json")
	b = endCompound(b, ps, 7)
	b = append(b, tDescribed)
	b = appendSymbol(b, "amqp:application-properties:map")
	b, as := beginCompound(b, tMap32)
	b = appendString(b, "k")
	b = append(b, tSmallUint, 9)
	b = endCompound(b, as, 2)
	b = appendDescriptor(b, secValue)
	b = appendString(b, "body text")
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Props.MessageId != "42" || m.Props.CorrelationId != "abababab-abab-abab-abab-abababababab" ||
		m.Props.ContentType != "application/json" || m.Props.Headers["k"] != int64(9) || string(m.Body) != "body text" {
		t.Fatalf("decoded %+v body %q", m.Props, m.Body)
	}
}

func TestDecodeMalformed(t *testing.T) {
	good := AppendFromAMQP091(nil, &wire.Properties{Headers: wire.Table{"a": "b"}}, "e", "r", []byte("body"))
	// Every prefix either fails or (ending on a section boundary) decodes
	// to fewer sections: never a panic, never the whole body.
	for i := 0; i < len(good); i++ {
		if m, err := Decode(good[:i]); err == nil && string(m.Body) == "body" {
			t.Fatalf("prefix of %d bytes decoded the whole body", i)
		}
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"not a section", []byte{0x01}},
		{"data longer than the message", []byte{0x00, 0x53, 0x75, 0xb0, 0xff, 0xff, 0xff, 0xff}},
		{"unknown section", []byte{0x00, 0x53, 0x99}},
		// Element counts that cannot fit their compound's size (found by
		// FuzzDecode: the map's count was taken as an allocation hint).
		{"application-properties map32 count", []byte("\x00St\xd1\x00\x00\x00\x04bod\x01")},
		{"application-properties map8 count", []byte{0x00, 0x53, 0x74, 0xc1, 0x02, 0xff, 0x40}},
		{"message-annotations map32 count", []byte{0x00, 0x53, 0x72, 0xd1, 0x00, 0x00, 0x00, 0x04, 0xff, 0xff, 0xff, 0xff}},
		{"properties list32 count", []byte{0x00, 0x53, 0x73, 0xd0, 0x00, 0x00, 0x00, 0x04, 0x7f, 0xff, 0xff, 0xff}},
		{"header list8 count", []byte{0x00, 0x53, 0x70, 0xc0, 0x01, 0x05}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode(tt.b); err == nil {
				t.Fatalf("Decode(% x) succeeded", tt.b)
			}
		})
	}
}

// DataBody takes exactly one data section, in any of its encodings, and
// nothing else.
func TestDataBody(t *testing.T) {
	big := append([]byte{0x00, 0x53, 0x75, 0xb0, 0x00, 0x00, 0x01, 0x00}, bytes.Repeat([]byte{'x'}, 256)...)
	tests := []struct {
		name string
		b    []byte
		body string // "" with ok false
		ok   bool
	}{
		{"vbin8", []byte{0x00, 0x53, 0x75, 0xa0, 0x03, 'a', 'b', 'c'}, "abc", true},
		{"empty vbin8", []byte{0x00, 0x53, 0x75, 0xa0, 0x00}, "", true},
		{"vbin32", big, strings.Repeat("x", 256), true},
		{"ulong descriptor", []byte{0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x75, 0xa0, 0x01, 'a'}, "a", true},
		{"vbin8 with a byte after it", []byte{0x00, 0x53, 0x75, 0xa0, 0x01, 'a', 0x40}, "", false},
		{"vbin8 cut short", []byte{0x00, 0x53, 0x75, 0xa0, 0x03, 'a'}, "", false},
		{"vbin32 cut short", big[:100], "", false},
		{"vbin32 length header cut", big[:6], "", false},
		{"amqp-value section", []byte{0x00, 0x53, 0x77, 0xa0, 0x01, 'a'}, "", false},
		{"not described", []byte{0xa0, 0x01, 'a'}, "", false},
		{"empty", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, ok := DataBody(tt.b)
			if ok != tt.ok || string(body) != tt.body {
				t.Fatalf("DataBody(% x) = %q, %v; want %q, %v", tt.b, body, ok, tt.body, tt.ok)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(AppendFromAMQP091(nil, &wire.Properties{DeliveryMode: 2, Headers: wire.Table{"a": "b", "t": wire.Table{"x": int32(1)}}}, "e", "r", []byte("body")))
	f.Add([]byte{0x00, 0x53, 0x77, 0xa1, 0x03, 'a', 'b', 'c'})
	f.Add([]byte{0x00, 0x53, 0x75, 0xa0, 0x03, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		// DataBody (the stream converter's fast path) agrees with Decode
		// wherever it accepts a message.
		if body, ok := DataBody(b); ok && (err != nil || !bytes.Equal(m.Body, body)) {
			t.Fatalf("DataBody took % x (body %q), Decode: %v, body %q", b, body, err, m.Body)
		}
		if err != nil {
			return
		}
		// Whatever decodes re-encodes and decodes to the same body.
		enc := AppendFromAMQP091(nil, &m.Props, m.Exchange, m.RoutingKey, m.Body)
		m2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if !bytes.Equal(m2.Body, m.Body) {
			t.Fatalf("body changed")
		}
	})
}
