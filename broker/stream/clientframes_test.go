package stream_test

import (
	"encoding/binary"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// frame builds a frame from its key, version and field bytes.
func frame(key, version uint16, fields ...[]byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, key)
	b = binary.BigEndian.AppendUint16(b, version)
	for _, f := range fields {
		b = append(b, f...)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// TestClientTuneKeys: the client's tune is taken with the response bit
// (0x8014: the Go and Java clients) and without it (0x0014: rstream and
// the Node client), as RabbitMQ takes both; the connection then opens and
// serves requests.
func TestClientTuneKeys(t *testing.T) {
	n := brokertest.Start(t)
	for _, tc := range []struct {
		name string
		key  uint16
	}{
		{"response bit (Go, Java clients)", proto.KeyTune | proto.ResponseBit},
		{"no response bit (rstream, Node client)", proto.KeyTune},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, n)
			tune := r.authenticate()
			r.write(frame(tc.key, 1, u32(tune.FrameMax), u32(0)))
			r.openVhost()
			if got := code(r.call(&proto.CreateStream{CorrelationID: 10, Stream: "tune-" + tc.name})); got != proto.CodeOK {
				t.Fatalf("create stream after open: code %d (%s)", got, proto.CodeText(got))
			}
		})
	}
}

// TestConsumerUpdateResponseWithIgnoredValue: rstream answers a consumer
// update with an offset value whatever the offset type (8 zero bytes after
// first or next); RabbitMQ ignores the value of a type that takes none, so
// the consumer starts where the type says instead of the connection being
// closed.
func TestConsumerUpdateResponseWithIgnoredValue(t *testing.T) {
	n := brokertest.Start(t)
	e := env(t, n)
	must(t, e.DeclareStream("sac", nil))
	publish(t, e, "sac", "m", 10, nil)

	r := dialRaw(t, n)
	r.open()
	r.send(&proto.Subscribe{CorrelationID: 10, SubscriptionID: 1, Stream: "sac", Offset: proto.OffsetSpec{Type: proto.OffsetNext}, Credit: 10,
		Properties: map[string]string{"name": "app", "single-active-consumer": "true"}})
	var update *proto.ConsumerUpdate
	for update == nil {
		switch m := r.recv().(type) {
		case *proto.Response:
			if m.Code != proto.CodeOK {
				t.Fatalf("subscribe: code %d", m.Code)
			}
		case *proto.ConsumerUpdate:
			update = m
		default:
			t.Fatalf("before the consumer update: %#v", m)
		}
	}
	if !update.Active {
		t.Fatal("the only consumer of the group is not active")
	}
	// As rstream sends it: correlation id, code ok, offset type first, and
	// an offset value of 0 that first does not take.
	r.write(frame(proto.KeyConsumerUpdate|proto.ResponseBit, 1, u32(update.CorrelationID), u16(proto.CodeOK), u16(proto.OffsetFirst), u64(0)))
	c, err := r.tryRecv()
	d, ok := c.(*proto.Deliver)
	if err != nil || !ok {
		t.Fatalf("after the consumer update response: %#v, %v; want a delivery from the first offset", c, err)
	}
	if records := binary.BigEndian.Uint32(d.Chunk[4:8]); d.SubscriptionID != 1 || records == 0 {
		t.Fatalf("delivery to subscription %d with %d records", d.SubscriptionID, records)
	}
}
