package transport

import "testing"

// The pool hands out buffers of the length asked for, with the capacity
// of their tier (a power of two from 256 bytes to 4 MiB), and a plain
// allocation past the largest; what comes back goes to its tier, and a
// buffer of a capacity no tier has is dropped.
func TestBufPoolTiers(t *testing.T) {
	var p bufPool
	cases := []struct {
		length, capacity int
	}{
		{0, 256},
		{1, 256},
		{256, 256},
		{257, 512},
		{16 << 10, 16 << 10},
		{1<<20 + 9, 2 << 20},
		{4 << 20, 4 << 20},
		{4<<20 + 1, 4<<20 + 1},
	}
	for _, tc := range cases {
		b := p.Get(tc.length)
		if len(*b) != tc.length || cap(*b) != tc.capacity {
			t.Errorf("Get(%d): len %d cap %d, want cap %d", tc.length, len(*b), cap(*b), tc.capacity)
		}
		for i := range *b {
			(*b)[i] = 0xAA
		}
		*b = (*b)[:0] // a prefix, as gRPC puts them back
		p.Put(b)
	}
	odd := make([]byte, 300)
	p.Put(&odd) // no tier of capacity 300: dropped, not handed out as a 512
	for range 10 {
		if b := p.Get(400); cap(*b) != 512 {
			t.Fatalf("Get(400) after a foreign buffer: cap %d", cap(*b))
		}
	}
}
