package message

import (
	"bytes"
	"errors"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
	}{
		{"empty", Message{}},
		{"full", Message{ID: 42, Exchange: "amq.topic", RoutingKey: "a.b.c", Props: []byte{0x90, 0, 1, 'x'}, Body: []byte("hello"), Persistent: true, Priority: 7, Expiry: 1234, Timestamp: 99}},
		{"long key", Message{RoutingKey: string(bytes.Repeat([]byte("k"), 255)), Body: bytes.Repeat([]byte{1}, 10000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := tt.msg.Encode(nil)
			if len(enc) != tt.msg.EncodedSize() {
				t.Fatalf("EncodedSize %d, encoding is %d bytes", tt.msg.EncodedSize(), len(enc))
			}
			got, err := Decode(enc)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got.ID != tt.msg.ID || got.Exchange != tt.msg.Exchange || got.RoutingKey != tt.msg.RoutingKey ||
				!bytes.Equal(got.Props, tt.msg.Props) || !bytes.Equal(got.Body, tt.msg.Body) ||
				got.Persistent != tt.msg.Persistent || got.Priority != tt.msg.Priority ||
				got.Expiry != tt.msg.Expiry || got.Timestamp != tt.msg.Timestamp {
				t.Fatalf("round trip mismatch: got %+v want %+v", got, tt.msg)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	m := Message{ID: 1, Exchange: "x", RoutingKey: "k", Props: []byte{1, 2}, Body: []byte("b")}
	f.Add(m.Encode(nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error type: %v", err)
			}
			return
		}
		again, err := Decode(got.Encode(nil))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if again.RoutingKey != got.RoutingKey || !bytes.Equal(again.Body, got.Body) {
			t.Fatalf("re-encode changed the message")
		}
		// Decoding like another message (the same or a different one)
		// gives the same message.
		for _, like := range []*Message{got, &m} {
			var into Message
			if err := DecodeInto(&into, b, like); err != nil {
				t.Fatalf("decode like %+v: %v", like, err)
			}
			if into.Exchange != got.Exchange || into.RoutingKey != got.RoutingKey || !bytes.Equal(into.Props, got.Props) || !bytes.Equal(into.Body, got.Body) || into.ID != got.ID {
				t.Fatalf("decode like another message: %+v, want %+v", into, got)
			}
		}
	})
}
