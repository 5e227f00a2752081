package wire

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func fullProperties() Properties {
	return Properties{
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		Headers:         Table{"x-retries": int32(3), "x-trace": Table{"id": "abc"}},
		DeliveryMode:    2,
		Priority:        9,
		CorrelationId:   "corr",
		ReplyTo:         "amq.rabbitmq.reply-to",
		Expiration:      "60000",
		MessageId:       "msg-1",
		Timestamp:       1700000000,
		Type:            "order.created",
		UserId:          "guest",
		AppId:           "warren-test",
		ClusterId:       "c1",
		Flags:           0xfffc,
	}
}

func TestPropertiesRoundTrip(t *testing.T) {
	full := fullProperties()
	tests := []struct {
		name  string
		p     Properties
		flags uint16
	}{
		{"none", Properties{}, 0},
		{"every flag", full, 0xfffc},
		{"persistent only", Properties{DeliveryMode: 2}, FlagDeliveryMode},
		{"present zero priority", Properties{Flags: FlagPriority}, FlagPriority},
		{"present empty headers", Properties{Flags: FlagHeaders}, FlagHeaders},
		{"expiration and type", Properties{Expiration: "10", Type: "t"}, FlagExpiration | FlagType},
		{"last only", Properties{ClusterId: "c"}, FlagClusterId},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := tt.p.Append(nil)
			if got := uint16(raw[0])<<8 | uint16(raw[1]); got != tt.flags {
				t.Fatalf("flags = %#04x, want %#04x", got, tt.flags)
			}
			got, err := DecodeProperties(raw)
			if err != nil {
				t.Fatalf("DecodeProperties: %v", err)
			}
			want := tt.p
			want.Flags = tt.flags
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
			}
			if again := got.Append(nil); !bytes.Equal(again, raw) {
				t.Fatalf("re-encoding differs:\n% x\n% x", again, raw)
			}
		})
	}
}

// TestPropertiesEachFlag encodes each property alone and checks that the
// fast paths find delivery mode, priority and expiration wherever the
// preceding properties put them.
func TestPropertiesEachFlag(t *testing.T) {
	full := fullProperties()
	for f := FlagContentType; f >= FlagClusterId; f >>= 1 {
		p := full
		p.Flags = 0xfffc &^ f
		// Drop f by zeroing its value in a copy that keeps the others.
		zeroFlag(&p, f)
		raw := p.Append(nil)
		got, err := DecodeProperties(raw)
		if err != nil {
			t.Fatalf("without %#04x: %v", f, err)
		}
		if got.Flags != 0xfffc&^f {
			t.Fatalf("without %#04x: flags %#04x", f, got.Flags)
		}
		mode, err := PropertiesDeliveryMode(raw)
		if err != nil || mode != p.DeliveryMode {
			t.Fatalf("without %#04x: PropertiesDeliveryMode = %d, %v; want %d", f, mode, err, p.DeliveryMode)
		}
		prio, ok, err := PropertiesPriority(raw)
		if err != nil || ok != (f != FlagPriority) || prio != p.Priority {
			t.Fatalf("without %#04x: PropertiesPriority = %d, %v, %v", f, prio, ok, err)
		}
		exp, ok, err := PropertiesExpiration(raw)
		if err != nil || ok != (f != FlagExpiration) || exp != p.Expiration {
			t.Fatalf("without %#04x: PropertiesExpiration = %q, %v, %v", f, exp, ok, err)
		}
		h, ok, err := PropertiesHeaders(raw)
		if err != nil || ok != (f != FlagHeaders) || !reflect.DeepEqual(h, p.Headers) {
			t.Fatalf("without %#04x: PropertiesHeaders = %v, %v, %v", f, h, ok, err)
		}
	}
}

func zeroFlag(p *Properties, f uint16) {
	switch f {
	case FlagContentType:
		p.ContentType = ""
	case FlagContentEncoding:
		p.ContentEncoding = ""
	case FlagHeaders:
		p.Headers = nil
	case FlagDeliveryMode:
		p.DeliveryMode = 0
	case FlagPriority:
		p.Priority = 0
	case FlagCorrelationId:
		p.CorrelationId = ""
	case FlagReplyTo:
		p.ReplyTo = ""
	case FlagExpiration:
		p.Expiration = ""
	case FlagMessageId:
		p.MessageId = ""
	case FlagTimestamp:
		p.Timestamp = 0
	case FlagType:
		p.Type = ""
	case FlagUserId:
		p.UserId = ""
	case FlagAppId:
		p.AppId = ""
	case FlagClusterId:
		p.ClusterId = ""
	}
}

func TestPropertiesGolden(t *testing.T) {
	p := Properties{ContentType: "t", DeliveryMode: 2, Expiration: "5"}
	want := []byte{0x91, 0x00, 1, 't', 2, 1, '5'}
	if got := p.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("got % x want % x", got, want)
	}
	// Absent properties: fast paths report absence, not an error.
	raw := []byte{0, 0}
	if m, err := PropertiesDeliveryMode(raw); m != 0 || err != nil {
		t.Fatalf("PropertiesDeliveryMode = %d, %v", m, err)
	}
	if _, ok, err := PropertiesExpiration(raw); ok || err != nil {
		t.Fatalf("PropertiesExpiration ok=%v err=%v", ok, err)
	}
	// A continuation word that announces nothing is accepted.
	if got, err := DecodeProperties([]byte{0x10, 0x01, 0x00, 0x00, 2}); err != nil || got.DeliveryMode != 2 {
		t.Fatalf("continuation: %#v, %v", got, err)
	}
}

func TestPropertiesMalformed(t *testing.T) {
	tests := []struct {
		name string
		raw  []byte
	}{
		{"empty", nil},
		{"one byte", []byte{0x80}},
		{"missing content type", []byte{0x80, 0}},
		{"short content type", []byte{0x80, 0, 5, 'a'}},
		{"headers beyond input", []byte{0x20, 0, 0, 0, 1, 0}},
		{"missing delivery mode", []byte{0x10, 0}},
		{"truncated timestamp", []byte{0x00, 0x40, 1, 2}},
		{"unknown continuation", []byte{0x00, 0x01, 0x80, 0x00}},
		{"truncated continuation", []byte{0x00, 0x01}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := DecodeProperties(tt.raw); !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeProperties = %#v, %v; want ErrMalformed", p, err)
			}
			if _, err := DecodeContentHeader(append(make([]byte, 12), tt.raw...)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeContentHeader err = %v; want ErrMalformed", err)
			}
		})
	}
	// The fast path fails when the property it needs cannot be reached.
	if _, err := PropertiesDeliveryMode([]byte{0x90, 0, 9}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("PropertiesDeliveryMode err = %v", err)
	}
	if _, _, err := PropertiesExpiration([]byte{0x01, 0x00, 3, 'a'}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("PropertiesExpiration err = %v", err)
	}
}

func TestDecodeContentHeader(t *testing.T) {
	props := (&Properties{DeliveryMode: 2}).Append(nil)
	frame := AppendHeaderFrame(nil, 7, ClassBasic, 123456789012, props)
	wantFrame := append([]byte{FrameHeader, 0, 7, 0, 0, 0, 15, 0, 60, 0, 0, 0, 0, 0, 0x1c, 0xbe, 0x99, 0x1a, 0x14, 0x10, 0, 2}, FrameEnd)
	if !bytes.Equal(frame, wantFrame) {
		t.Fatalf("AppendHeaderFrame:\n got % x\nwant % x", frame, wantFrame)
	}
	h, err := DecodeContentHeader(frame[7 : len(frame)-1])
	if err != nil {
		t.Fatal(err)
	}
	if h.ClassID != ClassBasic || h.Weight != 0 || h.BodySize != 123456789012 || !bytes.Equal(h.Properties, props) {
		t.Fatalf("DecodeContentHeader = %+v", h)
	}
	// Empty props are sent as "no properties".
	empty := AppendHeaderFrame(nil, 1, ClassBasic, 0, nil)
	h, err = DecodeContentHeader(empty[7 : len(empty)-1])
	if err != nil || !bytes.Equal(h.Properties, []byte{0, 0}) {
		t.Fatalf("empty props: %+v, %v", h, err)
	}
	if _, err := DecodeContentHeader([]byte{0, 60, 0, 0}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short header: %v", err)
	}
}
