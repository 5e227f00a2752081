package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// The fuzz targets check that decoders never panic on arbitrary input and
// that whatever decodes re-encodes canonically: encode(decode(x)) decodes
// again and encodes to the same bytes. (Comparing bytes rather than values
// keeps NaN floats comparable.)

func seedMethods(f *testing.F) {
	for _, m := range allMethods() {
		f.Add(m.Append(nil))
	}
	for _, m := range allMethods() {
		if err := fillMethod(m, 3); err != nil {
			f.Fatal(err)
		}
		f.Add(m.Append(nil))
	}
}

func FuzzDecodeMethod(f *testing.F) {
	seedMethods(f)
	f.Add([]byte{0, 60, 0, 40, 0, 0, 0xff})
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := DecodeMethod(payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownMethod) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		b1 := m.Append(nil)
		m2, err := DecodeMethod(b1)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", m.Name(), err)
		}
		if b2 := m2.Append(nil); !bytes.Equal(b1, b2) {
			t.Fatalf("%s: re-encoding not stable:\n% x\n% x", m.Name(), b1, b2)
		}
	})
}

func FuzzDecodeTable(f *testing.F) {
	f.Add(AppendTable(nil, Table{
		"bool": true, "int8": int8(-1), "uint8": uint8(1), "int16": int16(-2), "uint16": uint16(2),
		"int32": int32(-3), "uint32": uint32(3), "int64": int64(-4), "float32": float32(0.5), "float64": 0.25,
		"decimal": Decimal{Scale: 1, Value: 5}, "string": "s", "bytes": []byte("x"),
		"time": time.Unix(5, 0).UTC(), "void": nil, "array": []any{"a", []any{true}}, "table": Table{"t": Table{}},
	}))
	f.Add(nestedTableBytes(MaxNestingDepth))
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, n, err := DecodeTable(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if n < 4 || n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		b1 := AppendTable(nil, tab)
		tab2, n2, err := DecodeTable(b1)
		if err != nil || n2 != len(b1) {
			t.Fatalf("re-encoded table does not decode: %v (%d of %d bytes)", err, n2, len(b1))
		}
		if b2 := AppendTable(nil, tab2); !bytes.Equal(b1, b2) {
			t.Fatalf("re-encoding not stable:\n% x\n% x", b1, b2)
		}
	})
}

func FuzzDecodeProperties(f *testing.F) {
	full := fullProperties()
	f.Add(full.Append(nil))
	f.Add((&Properties{DeliveryMode: 2, Expiration: "100"}).Append(nil))
	f.Add([]byte{0x10, 0x01, 0x00, 0x00, 2})
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		mode, modeErr := PropertiesDeliveryMode(raw)
		prio, prioOK, prioErr := PropertiesPriority(raw)
		exp, expOK, expErr := PropertiesExpiration(raw)
		uid, uidOK, uidErr := PropertiesUserID(raw)
		_, hdrErr := DecodeContentHeader(append(make([]byte, 12), raw...))
		p, err := DecodeProperties(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if hdrErr != nil || modeErr != nil || prioErr != nil || expErr != nil || uidErr != nil {
			t.Fatalf("fast paths fail on decodable properties: %v %v %v %v %v", hdrErr, modeErr, prioErr, expErr, uidErr)
		}
		if mode != p.DeliveryMode || prio != p.Priority || prioOK != (p.Flags&FlagPriority != 0) ||
			exp != p.Expiration || expOK != (p.Flags&FlagExpiration != 0) ||
			uid != p.UserId || uidOK != (p.Flags&FlagUserId != 0) {
			t.Fatalf("fast paths disagree with DecodeProperties: %d %d/%v %q/%v %q/%v vs %+v", mode, prio, prioOK, exp, expOK, uid, uidOK, p)
		}
		if h, ok, err := PropertiesHeaders(raw); err != nil || ok != (p.Flags&FlagHeaders != 0) ||
			!bytes.Equal(AppendTable(nil, h), AppendTable(nil, p.Headers)) {
			t.Fatalf("PropertiesHeaders disagrees with DecodeProperties: %v %v", ok, err)
		}
		if rt, ok, err := PropertiesReplyTo(raw); err != nil || ok != (p.Flags&FlagReplyTo != 0) || string(rt) != p.ReplyTo {
			t.Fatalf("PropertiesReplyTo disagrees with DecodeProperties: %q %v %v", rt, ok, err)
		}
		if rewritten, err := ReplaceReplyTo(raw, "amq.rabbitmq.reply-to.x.y"); (err == nil) != (p.Flags&FlagReplyTo != 0) {
			t.Fatalf("ReplaceReplyTo: %v with flags %#04x", err, p.Flags)
		} else if err == nil {
			want := p
			want.ReplyTo = "amq.rabbitmq.reply-to.x.y"
			got, err := DecodeProperties(rewritten)
			if err != nil || !bytes.Equal(got.Append(nil), want.Append(nil)) {
				t.Fatalf("ReplaceReplyTo changed more than reply-to: %v\n%+v\n%+v", err, got, want)
			}
		}
		b1 := p.Append(nil)
		p2, err := DecodeProperties(b1)
		if err != nil {
			t.Fatalf("re-encoded properties do not decode: %v", err)
		}
		if b2 := p2.Append(nil); !bytes.Equal(b1, b2) {
			t.Fatalf("re-encoding not stable:\n% x\n% x", b1, b2)
		}
	})
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(uint16(0), message([]byte(ProtocolHeader), 1, []byte("body"), 4096))
	f.Add(uint16(4096), AppendHeartbeat(AppendBodyFrames(nil, 2, make([]byte, 5000), 4096)))
	f.Add(uint16(0), AppendMethodFrame(nil, 0, &ConnectionStart{ServerProperties: Table{"a": []any{int8(1)}}}))
	f.Fuzz(func(t *testing.T, maxFrame uint16, stream []byte) {
		r := NewReader(bytes.NewReader(stream), 0)
		r.SetMaxFrameSize(uint32(maxFrame))
		for {
			fr, err := r.ReadFrame()
			if err != nil {
				switch {
				case err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrFrameTooLarge),
					errors.Is(err, ErrBadFrameEnd), errors.Is(err, ErrBadFrameType):
				default:
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if maxFrame != 0 && len(fr.Payload)+FrameOverhead > int(maxFrame) {
				t.Fatalf("frame of %d bytes passed frame-max %d", len(fr.Payload)+FrameOverhead, maxFrame)
			}
			switch fr.Type {
			case FrameMethod:
				m, err := DecodeMethod(fr.Payload)
				if err != nil {
					continue
				}
				out := AppendMethodFrame(nil, fr.Channel, m)
				back, err := NewReader(bytes.NewReader(out), 0).ReadFrame()
				if err != nil || back.Channel != fr.Channel || back.Type != FrameMethod {
					t.Fatalf("re-encoded method frame: %+v %v", back, err)
				}
				m2, err := DecodeMethod(back.Payload)
				if err != nil || !bytes.Equal(m2.Append(nil), back.Payload) {
					t.Fatalf("re-encoded %s does not round-trip: %v", m.Name(), err)
				}
			case FrameHeader:
				h, err := DecodeContentHeader(fr.Payload)
				if err != nil {
					continue
				}
				out := AppendHeaderFrame(nil, fr.Channel, h.ClassID, h.BodySize, h.Properties)
				back, err := NewReader(bytes.NewReader(out), 0).ReadFrame()
				if err != nil {
					t.Fatalf("re-encoded header frame: %v", err)
				}
				h2, err := DecodeContentHeader(back.Payload)
				if err != nil || h2.ClassID != h.ClassID || h2.BodySize != h.BodySize || !bytes.Equal(h2.Properties, h.Properties) {
					t.Fatalf("header round trip: %+v vs %+v: %v", h2, h, err)
				}
			}
		}
	})
}

// FuzzCheckTable: CheckTable answers as DecodeTable does (same error
// class, same length), so what a publish lets through decodes later.
func FuzzCheckTable(f *testing.F) {
	f.Add(AppendTable(nil, Table{"a": []any{"x", Table{"b": int8(1)}}, "s": "v"}))
	f.Add(nestedTableBytes(MaxNestingDepth - 1))
	f.Add(nestedTableBytes(MaxNestingDepth))
	f.Add([]byte{0, 0, 0, 3, 1, 'k', 'V'})
	f.Add([]byte{0, 0, 0, 2, 0, 'x'}) // a byte array whose length is cut short
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := CheckTable(b)
		_, dn, derr := DecodeTable(b)
		if (err == nil) != (derr == nil) || n != dn {
			t.Fatalf("CheckTable %d %v, DecodeTable %d %v", n, err, dn, derr)
		}
		if err != nil && (!errors.Is(err, ErrMalformed) || errors.Is(err, ErrTooDeep) != errors.Is(derr, ErrTooDeep)) {
			t.Fatalf("CheckTable error %v, DecodeTable error %v", err, derr)
		}
	})
}

// FuzzDecodeContentHeader: a content header the broker accepts on publish
// has properties that decode in full (dead-lettering, the HTTP API), and
// re-encodes to the same frame.
func FuzzDecodeContentHeader(f *testing.F) {
	full := fullProperties()
	f.Add(AppendHeaderFrame(nil, 1, ClassBasic, 5, full.Append(nil))[7:])
	f.Add(AppendHeaderFrame(nil, 1, ClassBasic, 1<<63, nil)[7:])
	deep := append([]byte{0x20, 0}, nestedTableBytes(MaxNestingDepth)...)
	f.Add(AppendHeaderFrame(nil, 1, ClassBasic, 0, deep)[7:])
	f.Fuzz(func(t *testing.T, payload []byte) {
		h, err := DecodeContentHeader(payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if _, err := DecodeProperties(h.Properties); err != nil {
			t.Fatalf("accepted header's properties do not decode: %v", err)
		}
		out := AppendHeaderFrame(nil, 0, h.ClassID, h.BodySize, h.Properties)
		h2, err := DecodeContentHeader(out[7 : len(out)-1])
		if err != nil || h2.BodySize != h.BodySize || !bytes.Equal(h2.Properties, h.Properties) {
			t.Fatalf("round trip: %+v vs %+v: %v", h2, h, err)
		}
	})
}
