package meta

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
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
	for _, payload := range []string{`{"op":"snapshot"}`, `{"op":"put_vhost"}`, `{"op":"delete_binding"}`, `{"op":"put_queue","queue":{"name":"q","arguments":{"a":[1e300,{"b":2}]}}}`} {
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
				s := NewState()
				if s.Validate(c) == nil {
					s.Apply(c)
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
