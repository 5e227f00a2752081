package queue_test

import (
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"

	"github.com/warrenmq/warren/broker/brokertest"
)

// rawMessage is a stream message whose encoding is given bytes: what a
// stream client that does not speak AMQP 1.0 (or gets it wrong) publishes.
type rawMessage struct {
	b  []byte
	id int64
}

func (m *rawMessage) MarshalBinary() ([]byte, error) { return m.b, nil }
func (m *rawMessage) UnmarshalBinary(b []byte) error { m.b = b; return nil }
func (m *rawMessage) SetPublishingId(id int64)       { m.id = id }
func (m *rawMessage) GetPublishingId() int64         { return m.id }
func (m *rawMessage) HasPublishingId() bool          { return false }
func (m *rawMessage) GetData() [][]byte              { return [][]byte{m.b} }
func (m *rawMessage) GetMessageProperties() *streamamqp.MessageProperties {
	return nil
}
func (m *rawMessage) GetMessageAnnotations() streamamqp.Annotations { return nil }
func (m *rawMessage) GetApplicationProperties() map[string]any      { return nil }
func (m *rawMessage) GetMessageHeader() *streamamqp.MessageHeader   { return nil }
func (m *rawMessage) GetAMQPValue() any                             { return nil }

// Messages that are not AMQP 1.0, or are malformed AMQP 1.0 (sections cut
// short, counts that cannot fit their size, unknown sections), reach AMQP
// 0.9.1 consumers as their bytes, with their offsets, and the messages
// around them as usual: a stream client cannot stall or crash the AMQP
// consumers of a stream by what it publishes.
func TestStreamClientBytesToAMQP(t *testing.T) {
	n := brokertest.Start(t)
	p := streamProducer(t, n, "raw")
	confirms := p.NotifyPublishConfirmation()

	tests := []struct {
		name string
		b    []byte
	}{
		{"plain text", []byte("not amqp 1.0")},
		{"application-properties map32 count past its size", []byte("\x00St\xd1\x00\x00\x00\x04bod\x01")},
		{"properties list32 count past its size", []byte{0x00, 0x53, 0x73, 0xd0, 0x00, 0x00, 0x00, 0x04, 0x7f, 0xff, 0xff, 0xff}},
		{"data section longer than the message", []byte{0x00, 0x53, 0x75, 0xb0, 0xff, 0xff, 0xff, 0xff}},
		{"unknown section", []byte{0x00, 0x53, 0x99}},
	}
	// A good message before and after each bad one.
	var want [][]byte
	for i, tt := range tests {
		want = append(want, []byte(fmt.Sprintf("good-%d", i)), tt.b)
	}
	want = append(want, []byte("good-last"))
	for i, b := range want {
		var m message.StreamMessage = &rawMessage{b: b}
		if i%2 == 0 {
			m = streamamqp.NewMessage(b)
		}
		if err := p.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < len(want); {
		select {
		case cs := <-confirms:
			for _, c := range cs {
				if !c.IsConfirmed() {
					t.Fatalf("message %d not confirmed", c.GetPublishingId())
				}
				got++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d confirms", got, len(want))
		}
	}

	ch := n.Channel(t)
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("raw", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range want {
		name := "good"
		if i%2 == 1 {
			name = tests[i/2].name
		}
		select {
		case d := <-ds:
			if string(d.Body) != string(b) || d.Headers["x-stream-offset"] != int64(i) {
				t.Fatalf("message %d (%s): body %q offset %v, want %q at %d", i, name, d.Body, d.Headers["x-stream-offset"], b, i)
			}
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d (%s) never arrived", i, name)
		}
	}
}
