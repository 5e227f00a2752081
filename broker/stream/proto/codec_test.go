package proto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func chunkBytes(n int) []byte {
	c := make([]byte, ChunkHeaderSize+n)
	c[0] = 0x50
	binary.BigEndian.PutUint32(c[36:], uint32(n))
	return c
}

// samples holds one value of every command, both directions.
func samples() []Command {
	sub := []byte{0x80 | 1<<4, 0, 2, 0, 0, 0, 9, 0, 0, 0, 3, 'a', 'b', 'c'}
	return []Command{
		&PeerProperties{CorrelationID: 1, Properties: map[string]string{"product": "x", "version": "1"}},
		&PeerPropertiesResponse{CorrelationID: 1, Code: CodeOK, Properties: map[string]string{"version": "4.2.0"}},
		&SaslHandshake{CorrelationID: 2},
		&SaslHandshakeResponse{CorrelationID: 2, Code: CodeOK, Mechanisms: []string{"PLAIN", "AMQPLAIN"}},
		&SaslAuthenticate{CorrelationID: 3, Mechanism: "PLAIN", Data: []byte("\x00guest\x00guest")},
		&Response{For: KeySaslAuthenticate, CorrelationID: 3, Code: CodeAuthenticationFailure},
		&Tune{FrameMax: 1 << 20, Heartbeat: 60},
		&Tune{Response: true, FrameMax: 1 << 20, Heartbeat: 30},
		&Open{CorrelationID: 4, Vhost: "/"},
		&OpenResponse{CorrelationID: 4, Code: CodeOK, Properties: map[string]string{"advertised_host": "h", "advertised_port": "5552"}},
		&Close{CorrelationID: 5, Code: CodeOK, Reason: "bye"},
		&Response{For: KeyClose, CorrelationID: 5, Code: CodeOK},
		&Heartbeat{},
		&CreateStream{CorrelationID: 6, Stream: "s", Arguments: map[string]string{"max-age": "3600s"}},
		&Response{For: KeyCreateStream, CorrelationID: 6, Code: CodeStreamAlreadyExists},
		&DeleteStream{CorrelationID: 7, Stream: "s"},
		&Metadata{CorrelationID: 8, Streams: []string{"a", "b"}},
		&MetadataResponse{CorrelationID: 8, Brokers: []Broker{{Reference: 0, Host: "h", Port: 5552}},
			Streams: []StreamMetadata{{Stream: "a", Code: CodeOK, Leader: 0, Replicas: []uint16{1, 2}}, {Stream: "b", Code: CodeStreamDoesNotExist, Leader: 0xFFFF}}},
		&MetadataUpdate{Code: CodeStreamNotAvailable, Stream: "a"},
		&DeclarePublisher{CorrelationID: 9, PublisherID: 3, Reference: "ref", Stream: "s"},
		&DeletePublisher{CorrelationID: 10, PublisherID: 3},
		&Publish{Version: 1, PublisherID: 3, Messages: []PublishedMessage{
			{PublishingID: 1, Entry: SimpleEntry([]byte("hello")), Records: 1},
			{PublishingID: 2, Entry: sub, Records: 2}}},
		&Publish{Version: 2, PublisherID: 3, Messages: []PublishedMessage{
			{PublishingID: 1, Filter: "eu", Entry: SimpleEntry([]byte("a")), Records: 1},
			{PublishingID: 2, Entry: SimpleEntry(nil), Records: 1}}},
		&PublishConfirm{PublisherID: 3, PublishingIDs: []uint64{1, 2, 3}},
		&PublishError{PublisherID: 3, Errors: []PublishingError{{PublishingID: 4, Code: CodePublisherDoesNotExist}}},
		&QueryPublisherSequence{CorrelationID: 11, Reference: "ref", Stream: "s"},
		&QueryPublisherSequenceResponse{CorrelationID: 11, Code: CodeOK, Sequence: 42},
		&Subscribe{CorrelationID: 12, SubscriptionID: 1, Stream: "s", Offset: OffsetSpec{Type: OffsetFirst}, Credit: 10},
		&Subscribe{CorrelationID: 12, SubscriptionID: 1, Stream: "s", Offset: OffsetSpec{Type: OffsetOffset, Value: 99}, Credit: 10,
			Properties: map[string]string{"name": "c", "single-active-consumer": "true"}},
		&Subscribe{CorrelationID: 12, SubscriptionID: 1, Stream: "s", Offset: OffsetSpec{Type: OffsetTimestamp, Value: -5}, Credit: 1},
		&Deliver{Version: 1, SubscriptionID: 1, Chunk: chunkBytes(10)},
		&Deliver{Version: 2, SubscriptionID: 1, CommittedChunkID: 77, Chunk: chunkBytes(0)},
		&Credit{SubscriptionID: 1, Credit: 5},
		&CreditResponse{Code: CodeSubscriptionIDDoesNotExist, SubscriptionID: 1},
		&StoreOffset{Reference: "c", Stream: "s", Offset: 1000},
		&QueryOffset{CorrelationID: 13, Reference: "c", Stream: "s"},
		&QueryOffsetResponse{CorrelationID: 13, Code: CodeNoOffset},
		&Unsubscribe{CorrelationID: 14, SubscriptionID: 1},
		&ConsumerUpdate{CorrelationID: 15, SubscriptionID: 1, Active: true},
		&ConsumerUpdateResponse{CorrelationID: 15, Code: CodeOK, Offset: OffsetSpec{Type: OffsetNext}},
		&CreateSuperStream{CorrelationID: 16, Name: "inv", Partitions: []string{"inv-0", "inv-1"}, BindingKeys: []string{"0", "1"}, Arguments: map[string]string{"max-age": "1s"}},
		&DeleteSuperStream{CorrelationID: 17, Name: "inv"},
		&Route{CorrelationID: 18, RoutingKey: "0", SuperStream: "inv"},
		&Partitions{CorrelationID: 19, SuperStream: "inv"},
		&StreamsResponse{For: KeyRoute, CorrelationID: 18, Code: CodeOK, Streams: []string{"inv-0"}},
		&StreamsResponse{For: KeyPartitions, CorrelationID: 19, Code: CodeOK, Streams: []string{"inv-0", "inv-1"}},
		&StreamStats{CorrelationID: 20, Stream: "s"},
		&StreamStatsResponse{CorrelationID: 20, Code: CodeOK, Stats: map[string]int64{"first_chunk_id": -1, "committed_chunk_id": 7}},
		&ExchangeVersions{CorrelationID: 21, Commands: []CommandVersion{{Key: KeyPublish, Min: 1, Max: 2}}},
		&ExchangeVersionsResponse{CorrelationID: 21, Code: CodeOK, Commands: ServerVersions()},
	}
}

// clientBodies are frame bodies as clients other than the Go one send
// them, where they differ from what Encode writes.
func clientBodies() map[string][]byte {
	return map[string][]byte{
		// rstream and the Node client: tune without the response bit.
		"tune 0x0014": {0, 0x14, 0, 1, 0, 0x10, 0, 0, 0, 0, 0, 60},
		// rstream: an offset value after a type that takes none.
		"consumer update response, next with a value": {0x80, 0x1a, 0, 1, 0, 0, 0, 7, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0},
	}
}

// TestDecodeClientBodies: what other clients send decodes as RabbitMQ
// reads it.
func TestDecodeClientBodies(t *testing.T) {
	want := map[string]Command{
		"tune 0x0014": &Tune{FrameMax: 1 << 20, Heartbeat: 60},
		"consumer update response, next with a value": &ConsumerUpdateResponse{CorrelationID: 7, Code: CodeOK, Offset: OffsetSpec{Type: OffsetNext}},
	}
	for name, body := range clientBodies() {
		got, err := Decode(body)
		if err != nil || !reflect.DeepEqual(got, want[name]) {
			t.Errorf("%s: got %#v, %v; want %#v", name, got, err, want[name])
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, c := range samples() {
		frame := Encode(nil, c)
		body, err := ReadFrame(bufio.NewReader(bytes.NewReader(frame)), nil, 0)
		if err != nil {
			t.Fatalf("%T: read frame: %v", c, err)
		}
		got, err := Decode(body)
		if err != nil {
			t.Fatalf("%T: decode: %v", c, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%T: round trip\n got %#v\nwant %#v", c, got, c)
		}
		// Every strict prefix of the body is malformed, never a panic.
		for i := 0; i < len(body); i++ {
			if _, err := Decode(body[:i]); err == nil && !zeroFields(c) {
				t.Errorf("%T: prefix %d of %d decoded", c, i, len(body))
			}
		}
	}
}

// zeroFields: a command whose body may legitimately end early (optional
// trailing properties).
func zeroFields(c Command) bool {
	switch c.(type) {
	case *Heartbeat, *Subscribe, *OpenResponse:
		return true
	}
	return false
}

func TestDecodePublishReuses(t *testing.T) {
	want := samples()[21].(*Publish)
	frame := Encode(nil, want)
	var p Publish
	for range 2 {
		if err := DecodePublish(frame[4:], &p); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(&p, want) {
		t.Fatalf("got %#v want %#v", p, want)
	}
	if string(p.Messages[0].Body()) != "hello" || p.Messages[1].Body() != nil {
		t.Fatalf("bodies: %q %q", p.Messages[0].Body(), p.Messages[1].Body())
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = DecodePublish(frame[4:], &p) }); allocs != 0 {
		t.Errorf("DecodePublish allocates %v times", allocs)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		body []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"unknown key", []byte{0, 99, 0, 1}, ErrUnknownCommand},
		{"unknown version", []byte{0, byte(KeyOpen), 0, 2, 0, 0, 0, 1, 0, 0}, ErrUnknownCommand},
		{"trailing bytes", append(Encode(nil, &Heartbeat{})[4:], 1), ErrMalformed},
		{"huge array", []byte{0, byte(KeyMetadata), 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff}, ErrMalformed},
		{"bad offset type", []byte{0, byte(KeySubscribe), 0, 1, 0, 0, 0, 1, 1, 0, 1, 's', 0, 6, 0, 1}, ErrMalformed},
		{"negative string", []byte{0, byte(KeyOpen), 0, 1, 0, 0, 0, 1, 0xff, 0xf0}, ErrMalformed},
		{"publish entry overruns", []byte{0, byte(KeyPublish), 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 200, 1}, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.body); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReadFrameLimits(t *testing.T) {
	big := Encode(nil, &Open{CorrelationID: 1, Vhost: string(make([]byte, 100))})
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(big)), nil, 50); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v", err)
	}
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader([]byte{0, 0, 0, 2, 0, 1})), nil, 0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("got %v", err)
	}
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(big[:20])), nil, 0); err == nil {
		t.Fatal("truncated frame read")
	}
}

func TestCorrelationID(t *testing.T) {
	id, ok := CorrelationID(Encode(nil, &Open{CorrelationID: 77, Vhost: "/"})[4:])
	if !ok || id != 77 {
		t.Fatalf("got %d %v", id, ok)
	}
	if _, ok := CorrelationID(Encode(nil, &Credit{SubscriptionID: 1, Credit: 1})[4:]); ok {
		t.Fatal("credit has no correlation id")
	}
}

func TestDeliverHeader(t *testing.T) {
	for _, v := range []uint16{1, 2} {
		d := &Deliver{Version: v, SubscriptionID: 4, CommittedChunkID: 9, Chunk: chunkBytes(5)}
		want := Encode(nil, d)
		got := append(AppendDeliverHeader(nil, v, 4, 9, len(d.Chunk)), d.Chunk...)
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: %x != %x", v, got, want)
		}
	}
	want := Encode(nil, &PublishConfirm{PublisherID: 2, PublishingIDs: []uint64{5, 6}})
	if got := AppendPublishConfirm(nil, 2, []uint64{5, 6}); !bytes.Equal(got, want) {
		t.Fatalf("confirm %x != %x", got, want)
	}
}
