package queue

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/amqp10"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/stream/client"
)

// The converter reuses properties between alike messages and patches the
// offset in: every message must still come out with its own body, offset
// and properties, whatever the sequence of alike and different messages.
func TestStreamConverter(t *testing.T) {
	props := []wire.Properties{
		{DeliveryMode: 2},
		{DeliveryMode: 2},
		{DeliveryMode: 2, ContentType: "a", Headers: wire.Table{"h": "1"}},
		{DeliveryMode: 2, ContentType: "a", Headers: wire.Table{"h": "1"}},
		{DeliveryMode: 2, ContentType: "a", Headers: wire.Table{"h": "2"}},
		{DeliveryMode: 1, ContentEncoding: "gzip", MessageId: "x"},
		{DeliveryMode: 2},
	}
	var c streamConverter
	var msg message.Message
	for round := 0; round < 3; round++ {
		for i, p := range props {
			off := uint64(round*100 + i)
			body := []byte(fmt.Sprintf("body-%d-%d", round, i))
			if i == 1 {
				body = make([]byte, 300) // vbin32 after vbin8: same prefix, longer body
				body[0] = byte(round)
			}
			enc := amqp10.AppendFromAMQP091(nil, &p, "ex", "rk", body)
			c.convert(&msg, enc, off)
			got, err := wire.DecodeProperties(msg.Props)
			if err != nil {
				t.Fatal(err)
			}
			if string(msg.Body) != string(body) || msg.Exchange != "ex" || msg.RoutingKey != "rk" {
				t.Fatalf("round %d message %d: body %q exchange %q key %q", round, i, msg.Body, msg.Exchange, msg.RoutingKey)
			}
			if got.Headers["x-stream-offset"] != int64(off) {
				t.Fatalf("round %d message %d: offset header %v, want %d", round, i, got.Headers["x-stream-offset"], off)
			}
			delete(got.Headers, "x-stream-offset")
			if len(got.Headers) == 0 {
				got.Headers = nil
			}
			got.Flags = 0
			want := p
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("round %d message %d:\n got %+v\nwant %+v", round, i, got, want)
			}
		}
	}
	// Bytes that are not AMQP 1.0 are delivered as they are.
	c.convert(&msg, []byte("raw bytes"), 7)
	if string(msg.Body) != "raw bytes" {
		t.Fatalf("raw body %q", msg.Body)
	}
}

// Alike messages after the first convert without decoding or allocating,
// also messages that are only a data section (what stream clients publish
// for a bare body, and what warren-perf stream fill writes), and the reuse
// ends at a message that is not alike.
func TestStreamConverterReusesAlikeMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		enc  func(body []byte) []byte
	}{
		{"data-section-only", func(body []byte) []byte { return client.DataMessage(body) }},
		{"with-properties", func(body []byte) []byte {
			return amqp10.AppendFromAMQP091(nil, &wire.Properties{DeliveryMode: 2, ContentType: "a"}, "", "q", body)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c streamConverter
			var msg message.Message
			first, second := tc.enc([]byte("first")), tc.enc([]byte("other"))
			c.convert(&msg, first, 1)
			off := uint64(2)
			if allocs := testing.AllocsPerRun(100, func() { c.convert(&msg, second, off) }); allocs != 0 {
				t.Fatalf("%.0f allocations converting an alike message, want 0 (decoded again)", allocs)
			}
			got, err := wire.DecodeProperties(msg.Props)
			if err != nil {
				t.Fatal(err)
			}
			if string(msg.Body) != "other" || got.Headers["x-stream-offset"] != int64(off) {
				t.Fatalf("body %q, offset %v", msg.Body, got.Headers["x-stream-offset"])
			}
			// Not AMQP 1.0, then alike again: each comes out as itself.
			c.convert(&msg, []byte("raw"), 3)
			if string(msg.Body) != "raw" {
				t.Fatalf("raw body %q", msg.Body)
			}
			c.convert(&msg, second, 4)
			if got, _ := wire.DecodeProperties(msg.Props); string(msg.Body) != "other" || got.Headers["x-stream-offset"] != int64(4) {
				t.Fatalf("after raw: body %q, offset %v", msg.Body, got.Headers["x-stream-offset"])
			}
		})
	}
}

// convert fills the message field by field (see streamConverter.set): a
// field added to message.Message must be set there too, or a converted
// message would carry the previous one's value.
func TestStreamConverterSetsEveryField(t *testing.T) {
	enc := amqp10.AppendFromAMQP091(nil, &wire.Properties{DeliveryMode: 2}, "ex", "rk", []byte("body"))
	for _, tc := range []struct {
		name  string
		prime bool // convert an alike message first: its properties are reused
		data  []byte
	}{
		{"decoded", false, enc},
		{"reused", true, enc},
		{"not AMQP 1.0", false, []byte{0xff, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c streamConverter
			if tc.prime {
				var first message.Message
				c.convert(&first, enc, 1)
			}
			msg := message.Message{}
			v := reflect.ValueOf(&msg).Elem()
			for i := 0; i < v.NumField(); i++ {
				f := v.Field(i)
				switch f.Kind() {
				case reflect.String:
					f.SetString("stale")
				case reflect.Slice:
					f.SetBytes([]byte("stale"))
				case reflect.Bool:
					f.SetBool(true)
				case reflect.Uint8, reflect.Uint64:
					f.SetUint(7)
				case reflect.Int64:
					f.SetInt(7)
				default:
					t.Fatalf("message.Message.%s: kind %s not covered by this test", v.Type().Field(i).Name, f.Kind())
				}
			}
			c.convert(&msg, tc.data, 2)
			want := message.Message{Exchange: "ex", RoutingKey: "rk", Props: msg.Props, Body: []byte("body")}
			if tc.name == "not AMQP 1.0" {
				want = message.Message{Props: msg.Props, Body: tc.data}
			}
			if !reflect.DeepEqual(msg, want) {
				t.Fatalf("converted message %+v, want %+v", msg, want)
			}
		})
	}
}
