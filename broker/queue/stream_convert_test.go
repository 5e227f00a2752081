package queue

import (
	"fmt"
	"testing"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/amqp10"
	"github.com/warrenmq/warren/broker/message"
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
