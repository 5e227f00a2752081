package meta

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"reflect"
	"testing"
)

// FuzzReadRecord feeds arbitrary bytes to the log record decoder: it must
// return a command or an error, never panic, and re-encoding a decoded
// command must decode again.
func FuzzReadRecord(f *testing.F) {
	for _, c := range []Command{
		{Op: OpPutVhost, Vhost: &Vhost{Name: "/"}},
		{Op: OpPutQueue, Queue: &Queue{Vhost: "/", Name: "q", Arguments: map[string]any{"x-max-length": 5, "nested": map[string]any{"a": []any{1.5, "x"}}}}},
		{Op: OpDeleteBinding, Binding: &Binding{Vhost: "/", Source: "x", Destination: "q"}},
		{Op: opSnapshot, Snapshot: NewState()},
	} {
		rec, err := encodeRecord(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rec)
		f.Add(rec[:len(rec)/2])
	}
	for _, payload := range []string{`{"op":"snapshot"}`, `{"op":"put_vhost"}`, `{"op":"delete_binding"}`, `{"op":"put_queue","queue":{"name":"q","arguments":{"a":[1e300,{"b":2}]}}}`,
		`{"op":"declare_queue","queue":{"vhost":"/","name":"q","exclusive":true,"arguments":{"x-max-length":[1,{"a":2}]}}}`,
		`{"op":"declare_queue","queue":{"vhost":"/","name":"q","owner":{"node":"n","conn":1}}}`, `{"op":"declare_queue"}`,
		`{"op":"declare_exchange","exchange":{"vhost":"/","name":"x","type":"topic","arguments":{"alternate-exchange":{"b":[1]}}}}`, `{"op":"declare_exchange"}`,
		`{"op":"delete_queue","vhost_name":"/","name":"q"}`} {
		f.Add([]byte(payload))
	}
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		// The payload under a valid header reaches the JSON decoder and
		// State.Apply past the checksum.
		if len(data) > 0 {
			var hdr [recordHeader]byte
			binary.BigEndian.PutUint32(hdr[:4], uint32(len(data)))
			binary.BigEndian.PutUint32(hdr[4:], crc32.Checksum(data, crcTable))
			if c, _, err := decodeRecord(hdr, data); err == nil {
				for _, s := range []*State{NewState(), fuzzState()} {
					if s.Validate(c) == nil {
						s.Apply(c)
					}
				}
			}
		}
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			c, n, err := readRecord(r)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errCorrupt) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if n < recordHeader {
				t.Fatalf("record size %d", n)
			}
			rec, err := encodeRecord(c)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if _, _, err := readRecord(bytes.NewReader(rec)); err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			// Applying a decoded command must not panic either.
			s := NewState()
			if s.Validate(c) == nil {
				s.Apply(c)
			}
		}
	})
}

// FuzzCheckAccess decodes arbitrary JSON as a definitions document and
// checks it against a store holding a vhost and a user: CheckAccess
// answers nil or an error naming an item, never panics, and changes
// nothing in the store.
func FuzzCheckAccess(f *testing.F) {
	for _, doc := range []string{
		`{"users":[{"name":"a","password_hash":"x","hashing_algorithm":"rabbit_password_hashing_md5","tags":"administrator"}]}`,
		`{"vhosts":[{"name":"v","default_queue_type":"quorum","storage":{"queue-version":3}}],"permissions":[{"user":"guest","vhost":"v","configure":"(","write":".*","read":".*"}]}`,
		`{"policies":[{"vhost":"/","name":"p","pattern":"^q","apply-to":"nothing","definition":{}}]}`,
		`{"topic_permissions":[{"user":"guest"}],"parameters":[{"name":"x","component":"shovel","vhost":"/"}]}`,
		`{"users":[{"name":""}],"vhosts":[{"name":""}],"permissions":[{}],"policies":[{}]}`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Definitions
		if json.Unmarshal(data, &d) != nil {
			return
		}
		ctx := context.Background()
		s, err := OpenLocal(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		must(t, s.PutVhost(ctx, Vhost{Name: "/"}))
		must(t, s.PutUser(ctx, User{Name: "guest"}))
		before := Export(s, "")
		err = CheckAccess(s, d)
		if err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNotFound) {
			t.Fatalf("CheckAccess: %v, want ErrInvalid or ErrNotFound", err)
		}
		if after := Export(s, ""); !reflect.DeepEqual(before, after) {
			t.Fatalf("CheckAccess changed the store")
		}
	})
}

// fuzzState has what declares and deletes meet: a vhost with an exclusive
// queue, an auto-delete exchange and a binding between them.
func fuzzState() *State {
	s := NewState()
	for _, c := range []Command{
		{Op: OpPutVhost, Vhost: &Vhost{Name: "/"}},
		{Op: OpDeclareQueue, Queue: &Queue{Vhost: "/", Name: "q", Exclusive: true, Owner: &QueueOwner{Node: "n", Conn: 1}, Arguments: map[string]any{"x-max-length": int64(5)}}},
		{Op: OpDeclareExchange, Exchange: &Exchange{Vhost: "/", Name: "x", Type: "topic", AutoDelete: true, Arguments: map[string]any{"alternate-exchange": "ae"}}},
		{Op: OpPutBinding, Binding: &Binding{Vhost: "/", Source: "x", Destination: "q", DestinationType: "queue", RoutingKey: "#"}},
	} {
		s.Apply(c)
	}
	return s
}
