package server_test

import (
	"net"
	"testing"

	"github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/netaccept"
	"github.com/warrenmq/warren/broker/server"
	"github.com/warrenmq/warren/broker/stream"
)

// The protocol listeners bound their connections' TCP segments (see
// amqp.ListenMSS): a client connecting over loopback is told so.
func TestProtocolListenersBoundSegmentSize(t *testing.T) {
	n := brokertest.Start(t)
	tests := []struct {
		listener string
		mss      int
	}{
		{server.ListenerAMQP, amqp.ListenMSS},
		{server.ListenerStream, stream.ListenMSS},
	}
	for _, tt := range tests {
		t.Run(tt.listener, func(t *testing.T) {
			c, err := net.Dial("tcp", n.Addr(tt.listener).String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			mss, err := netaccept.SegmentSize(c)
			if err != nil {
				t.Fatal(err)
			}
			if mss > tt.mss {
				t.Fatalf("client's segment size %d, want at most %d", mss, tt.mss)
			}
		})
	}
}
