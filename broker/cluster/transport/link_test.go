package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "github.com/warrenmq/warren/broker/cluster/clusterpb"
)

// stuckStream is a frameStream whose peer reads nothing: Send blocks
// until the stream is released.
type stuckStream struct{ release chan struct{} }

func (s stuckStream) Send(*pb.Frame) error {
	<-s.release
	return nil
}

func (s stuckStream) Recv() (*pb.Frame, error) {
	<-s.release
	return nil, errors.New("released")
}

// A link whose peer reads nothing holds a sender at its limit, and lets
// one whose context is marked Immediate through at once, past it.
func TestPutWaitsForRoomUnlessImmediate(t *testing.T) {
	s := stuckStream{release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	l := newLink(ctx, s, &counters{}, 1024)
	defer func() {
		close(s.release)
		cancel()
		<-l.done
	}()
	msg := func() *pb.Message {
		return &pb.Message{Body: &pb.Message_Call{Call: &pb.CallRequest{Method: "m", Payload: make([]byte, 600)}}}
	}
	// The writer takes the first into its frame (stuck in Send); the
	// second fills the queue (a third would pass its limit).
	for i := range 2 {
		if err := l.put(context.Background(), msg()); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	if err := l.put(short, msg()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put on a full queue: %v, want it to wait until its deadline", err)
	}
	start := time.Now()
	if err := l.put(Immediate(short), msg()); err != nil {
		t.Fatalf("Immediate put on a full queue: %v", err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("Immediate put took %v", d)
	}
}
