package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
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

// tcpPair is a connected loopback TCP pair.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() {
		a.Close()
		b.Close()
	})
	return a, b
}

// Over plain TCP, a put sends from its own goroutine; a socket that does
// not take a frame whole hands its rest, and what is queued after it, to
// the writer. Whatever mix of the two sent them, messages put by several
// goroutines arrive whole, each goroutine's in its order: a slow putter of
// big messages (each put finds the writer idle and leaves it a rest), and
// fast putters (the writer mostly holds the turn).
func TestInlinePutsFillingTheSocketArriveWholeAndInOrder(t *testing.T) {
	for _, tc := range []struct {
		name           string
		putters, each  int
		pauseEvery     int
		pause          time.Duration
		minSize, sizes int
	}{
		{"one slow putter of big messages", 1, 60, 1, time.Millisecond, 64 << 10, 64 << 10},
		{"fast putters", 4, 300, 3, 100 * time.Microsecond, 1, 96 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tcpPair(t)
			// Small socket buffers: a big frame rarely goes whole.
			_ = a.(*net.TCPConn).SetWriteBuffer(32 << 10)
			_ = b.(*net.TCPConn).SetReadBuffer(32 << 10)
			_ = b.SetReadDeadline(time.Now().Add(20 * time.Second)) // a garbled length would wait for ever
			out := newConnStream(a, bufio.NewReader(a), 8<<20)
			if !out.nonBlocking() {
				t.Fatal("a lane over plain TCP does not write without blocking")
			}
			in := newConnStream(b, bufio.NewReader(b), 8<<20)
			ctx, cancel := context.WithCancel(context.Background())
			stats := &counters{}
			l := newLink(ctx, out, stats, queueBytes)
			defer func() {
				cancel()
				a.Close() // the writer may wait on a full socket
				<-l.done
			}()
			size := func(p, i int) int { return tc.minSize + ((p*tc.each+i)*7919)%tc.sizes }
			mark := func(p, i int) byte { return byte(p*tc.each + i) }
			var wg sync.WaitGroup
			defer wg.Wait() // before the link ends: puts never wait here
			for p := range tc.putters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range tc.each {
						// Each byte tells its message.
						payload := bytes.Repeat([]byte{mark(p, i)}, size(p, i))
						m := &pb.Message{Id: uint64(p)<<32 | uint64(i), Body: &pb.Message_Call{Call: &pb.CallRequest{Method: "m", Payload: payload}}}
						if err := l.put(Immediate(ctx), m); err != nil {
							t.Errorf("put %d of %d: %v", i, p, err)
							return
						}
						if i%tc.pauseEvery == 0 {
							time.Sleep(tc.pause) // the queue drains
						}
					}
				}()
			}
			next := make([]int, tc.putters)
			for got := 0; got < tc.putters*tc.each; {
				f, err := in.Recv()
				if err != nil {
					t.Fatalf("after %d messages: %v", got, err)
				}
				for _, m := range f.GetMessages() {
					p, i := int(m.GetId()>>32), int(m.GetId()&(1<<32-1))
					if p >= tc.putters || i != next[p] {
						t.Fatalf("message %d of putter %d arrived, want %d", i, p, next[p])
					}
					next[p]++
					payload := m.GetCall().GetPayload()
					if len(payload) != size(p, i) || bytes.Count(payload, []byte{mark(p, i)}) != len(payload) {
						t.Fatalf("message %d of putter %d arrived garbled (%d bytes)", i, p, len(payload))
					}
					got++
				}
			}
			wg.Wait()
			if n := stats.messagesSent.Load(); n != uint64(tc.putters*tc.each) {
				t.Fatalf("%d messages counted sent, want %d", n, tc.putters*tc.each)
			}
		})
	}
}
