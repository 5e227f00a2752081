package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/brokertest/loopback"
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
			b, a := loopback.Pair(t)
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
			// The peer may read a frame before its writer counts it.
			eventually.True(t, 10*time.Second, "every message counted sent", func() bool {
				return stats.messagesSent.Load() == uint64(tc.putters*tc.each)
			})
		})
	}
}

// scriptedStream is an inlineStream whose socket takes part of one chosen
// trySend only; it records what each goroutine sent, and fails the test
// on a frame or inline send while a rest is pending.
type scriptedStream struct {
	t         *testing.T
	partial   int    // the trySend (counted from 1) that leaves a rest
	onPartial func() // called by that trySend
	slow      time.Duration

	mu      sync.Mutex
	tries   int
	pending bool     // a rest is not sent yet
	ids     []uint64 // messages in the order they went out
	log     []string
}

func (s *scriptedStream) Recv() (*pb.Frame, error) { select {} }
func (s *scriptedStream) nonBlocking() bool        { return true }

func (s *scriptedStream) record(how string, f *pb.Frame) {
	if s.pending {
		s.t.Errorf("%s of a frame while a rest is pending", how)
	}
	for _, m := range f.GetMessages() {
		s.ids = append(s.ids, m.GetId())
	}
	s.log = append(s.log, fmt.Sprintf("%s%d", how, len(f.GetMessages())))
}

func (s *scriptedStream) Send(f *pb.Frame) error {
	time.Sleep(s.slow) // puts pile up meanwhile
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("send", f)
	return nil
}

func (s *scriptedStream) trySend(f *pb.Frame) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("try", f)
	s.tries++
	if s.tries == s.partial {
		s.pending = true
		s.log = append(s.log, "partial")
		s.onPartial()
		return []byte("rest"), nil
	}
	return nil, nil
}

func (s *scriptedStream) sendRest(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pending || string(b) != "rest" {
		s.t.Errorf("sendRest(%q) with pending %v", b, s.pending)
	}
	s.pending = false
	s.log = append(s.log, "rest")
	return nil
}

// A frame the socket takes only in part, in the middle of an inline put's
// several frames: its rest goes first, then the frames after it and what
// was queued meanwhile, in order, all from the writer.
func TestInlineRestThenTheRestOfTheBatch(t *testing.T) {
	// Messages of 400 KiB: two to a frame, so the batch below is frames.
	big := func(id uint64) *pb.Message {
		return &pb.Message{Id: id, Body: &pb.Message_Call{Call: &pb.CallRequest{Method: "m", Payload: make([]byte, 400<<10)}}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var l *link
	put := func(id uint64) {
		if err := l.put(Immediate(ctx), big(id)); err != nil {
			t.Fatal(err)
		}
	}
	// While the partial frame is written, another message is put.
	s := &scriptedStream{t: t, partial: 2, onPartial: func() { put(5) }, slow: 20 * time.Millisecond}
	l = newLink(ctx, s, &counters{}, queueBytes)
	// Queue 5 messages behind a turn held here, then let a put take them
	// inline: frames of 2, 2 and 1, the second left in part.
	l.mu.Lock()
	l.writing = true
	l.mu.Unlock()
	for id := range uint64(5) {
		put(id)
	}
	l.mu.Lock()
	msgs, sizes := l.takeLocked()
	l.mu.Unlock()
	l.sendInline(msgs, sizes)
	put(6) // queued behind the rest
	put(7)
	eventually.True(t, 10*time.Second, "8 messages out", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.ids) == 8 && !s.pending
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if want := []uint64{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(s.ids, want) {
		t.Fatalf("messages went out as %v, want %v", s.ids, want)
	}
	// After the partial frame: its rest, then only the writer's frames.
	if got := strings.Join(s.log, " "); !strings.HasPrefix(got, "try2 try2 partial rest send") || strings.Count(got, "try") != 2 {
		t.Fatalf("frames went out as %q, want the rest right after the partial frame, then the writer's", got)
	}
}
