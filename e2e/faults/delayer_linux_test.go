package faults

import (
	"bytes"
	"testing"
)

func TestAttrRoundTrip(t *testing.T) {
	b := append(attr(nfqaCfgQueueMax, []byte{0, 1, 0, 0}), attr(nfqaPacketHdr, []byte{0, 0, 1, 7, 8, 0, 3})...)
	if len(b)%4 != 0 {
		t.Fatalf("attributes not padded to 4 bytes: %d", len(b))
	}
	if got := findAttr(b, nfqaPacketHdr); !bytes.Equal(got, []byte{0, 0, 1, 7, 8, 0, 3}) {
		t.Fatalf("packet header: %v", got)
	}
	if got := findAttr(b, 9); got != nil {
		t.Fatalf("absent attribute found: %v", got)
	}
}

// FuzzFindAttr: attributes from the kernel never make the delayer panic.
func FuzzFindAttr(f *testing.F) {
	f.Add(attr(nfqaPacketHdr, []byte{0, 0, 0, 1, 8, 0, 3}), uint16(nfqaPacketHdr))
	f.Add([]byte{4, 0, 1, 0, 255, 255, 1, 0}, uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, typ uint16) {
		if got := findAttr(b, typ); len(got) > len(b) {
			t.Fatalf("payload of %d bytes from %d", len(got), len(b))
		}
	})
}
