package netaccept

import (
	"context"
	"net"
	"testing"
)

func TestListenLimitsSegmentsBothWays(t *testing.T) {
	tests := []struct {
		name string
		mss  int
	}{
		{"AMQP's", 32000},
		{"stream's", 8192},
		{"the largest", MaxMSS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := Listen(context.Background(), "127.0.0.1:0", tt.mss)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			server, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			// The client's segments are bounded by what the listener
			// announced, the server's by its own setting.
			for side, c := range map[string]net.Conn{"client": client, "server": server} {
				got, err := SegmentSize(c)
				if err != nil {
					t.Fatal(err)
				}
				if got > tt.mss || got < tt.mss/2 {
					t.Errorf("%s's segment size %d, want at most %d (and near it)", side, got, tt.mss)
				}
			}
		})
	}
}

func TestListenRefusesAnImpossibleSegmentSize(t *testing.T) {
	for _, mss := range []int{-1, MaxMSS + 1, 65536} {
		if ln, err := Listen(context.Background(), "127.0.0.1:0", mss); err == nil {
			ln.Close()
			t.Errorf("Listen with segment size %d: no error", mss)
		}
	}
}
