package amqp_test

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/config"
)

// rawClient opens a TCP connection, completes the handshake as guest with
// frame-max 131072 and the given heartbeat, and opens channel 1 without
// reading the broker's channel.open-ok: the caller decides when (if ever)
// to read.
func rawClient(t *testing.T, addr string, heartbeat uint16) (net.Conn, *wire.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(nc, 64<<10)
	send := func(ch uint16, m wire.Method) {
		t.Helper()
		if _, err := nc.Write(wire.AppendMethodFrame(nil, ch, m)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Write([]byte(wire.ProtocolHeader)); err != nil {
		t.Fatal(err)
	}
	expectMethod(t, r, "connection.start")
	send(0, &wire.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	expectMethod(t, r, "connection.tune")
	send(0, &wire.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131072, Heartbeat: heartbeat})
	send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	expectMethod(t, r, "connection.open-ok")
	_ = nc.SetDeadline(time.Time{})
	send(1, &wire.ChannelOpen{})
	return nc, r
}

// flooder writes the same run of publishes to a socket until stopped or
// its socket fails, and never reads.
type flooder struct {
	perRun int   // publishes in one run
	runs   int64 // runs written whole (atomic)
	stop   atomic.Bool
	done   chan error
}

func flood(nc net.Conn, run []byte, perRun int) *flooder {
	f := &flooder{perRun: perRun, done: make(chan error, 1)}
	go func() {
		for !f.stop.Load() {
			if _, err := nc.Write(run); err != nil {
				f.done <- err
				return
			}
			atomic.AddInt64(&f.runs, 1)
		}
		f.done <- nil
	}()
	return f
}

func (f *flooder) published() int64 { return atomic.LoadInt64(&f.runs) * int64(f.perRun) }

// liveHeap is the process's live heap after a collection: the in-process
// broker's, mostly.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// floodUntilStalled floods until the client's writes stop making progress
// for a second (the broker stopped reading it) or it has written maxBytes,
// failing the test as soon as the broker's heap has grown by more than
// bound.
func floodUntilStalled(t *testing.T, f *flooder, runBytes int, maxBytes, base, bound int64) {
	t.Helper()
	last, lastChange := int64(-1), time.Now()
	eventually.Succeeds(t, 90*time.Second, "the broker stops reading a client that does not read", func() error {
		if grown := liveHeap() - base; grown > bound {
			t.Fatalf("broker heap grew by %d MB (bound %d MB) after the client wrote %d MB without reading",
				grown>>20, bound>>20, atomic.LoadInt64(&f.runs)*int64(runBytes)>>20)
		}
		runs := atomic.LoadInt64(&f.runs)
		if written := runs * int64(runBytes); written >= maxBytes {
			return nil // the heap check above is what this test is about
		}
		if runs != last {
			last, lastChange = runs, time.Now()
			return fmt.Errorf("client still writing (%d MB so far)", runs*int64(runBytes)>>20)
		}
		if time.Since(lastChange) < time.Second {
			return errors.New("client's writes stalled for less than a second")
		}
		return nil
	})
}

// TestProbeNeverReadingClientIsPushedBack: a publisher in confirm mode, one
// whose mandatory messages come back as basic.return with their 1 MB
// bodies, or one that gets the same 1 MB message again and again, that
// never reads its socket does not grow the broker's memory:
// the broker stops reading it once the output waiting for it is over
// amqp.output_buffer_limit, and TCP pushes back. Meanwhile another client
// publishes and consumes as usual; once the slow client reads, it gets
// every confirm, return and get-ok.
func TestProbeNeverReadingClientIsPushedBack(t *testing.T) {
	const bound = 64 << 20 // heap growth allowed, the default limit being 4 MiB
	tests := []struct {
		name string
		// prepare readies the broker (as guest); setup is what the slow
		// client sends first, run one run of what it floods.
		prepare func(t *testing.T, ch *amqp091.Channel)
		setup   []wire.Method
		run     func() ([]byte, int)
		maxSent int64
		// settled counts the confirms (acks, highest tag) or returns read
		// (nil: the output is not read back).
		settled func(m wire.Method, n int64) int64
	}{
		{"confirms of unroutable publishes", nil, []wire.Method{&wire.ConfirmSelect{}}, func() ([]byte, int) {
			var b []byte
			for range 1000 {
				b = wire.AppendMethodFrame(b, 1, &wire.BasicPublish{RoutingKey: "nowhere"})
				b = wire.AppendHeaderFrame(b, 1, wire.ClassBasic, 0, []byte{0, 0})
			}
			return b, 1000
		}, 400 << 20, func(m wire.Method, n int64) int64 {
			if ack, ok := m.(*wire.BasicAck); ok {
				return int64(ack.DeliveryTag) // multiple: every tag up to it
			}
			return n
		}},
		{"returns of mandatory 1 MB messages", nil, nil, func() ([]byte, int) {
			b := wire.AppendMethodFrame(nil, 1, &wire.BasicPublish{RoutingKey: "nowhere", Mandatory: true})
			b = wire.AppendHeaderFrame(b, 1, wire.ClassBasic, 1<<20, []byte{0, 0})
			return wire.AppendBodyFrames(b, 1, make([]byte, 1<<20), 131072), 1
		}, 400 << 20, func(m wire.Method, n int64) int64 {
			if _, ok := m.(*wire.BasicReturn); ok {
				return n + 1
			}
			return n
		}},
		{"basic.get of a 1 MB message, again and again", func(t *testing.T, ch *amqp091.Channel) {
			declare(t, ch, "big", false, nil)
			publishConfirmed(t, ch, "", "big", []string{string(make([]byte, 1<<20))}, false)
		}, nil, func() ([]byte, int) {
			// 40 bytes in, 1 MB out: the nack puts the message back for
			// the next get.
			b := wire.AppendMethodFrame(nil, 1, &wire.BasicGet{Queue: "big"})
			return wire.AppendMethodFrame(b, 1, &wire.BasicNack{Multiple: true, Requeue: true}), 1
		}, 400 << 20, nil}, // reading back the GBs of get-oks the socket buffers asked for proves nothing more
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := brokertest.Start(t)
			bystander := n.Channel(t)
			declare(t, bystander, "bystander", false, nil)
			if tt.prepare != nil {
				tt.prepare(t, n.Channel(t))
			}
			base := liveHeap()

			nc, r := rawClient(t, n.AMQPAddr(), 0)
			for _, m := range tt.setup {
				if _, err := nc.Write(wire.AppendMethodFrame(nil, 1, m)); err != nil {
					t.Fatal(err)
				}
			}
			run, perRun := tt.run()
			f := flood(nc, run, perRun)
			t.Cleanup(func() { f.stop.Store(true); nc.Close() })
			floodUntilStalled(t, f, len(run), tt.maxSent, base, bound)
			t.Logf("the client stalled after %d MB; broker heap grew by %d MB", atomic.LoadInt64(&f.runs)*int64(len(run))>>20, (liveHeap()-base)>>20)
			eventually.Holds(t, time.Second, "broker heap while the client does not read", func() error {
				if grown := liveHeap() - base; grown > bound {
					return fmt.Errorf("grew by %d MB", grown>>20)
				}
				return nil
			})

			// Other connections are not held up.
			publishConfirmed(t, bystander, "", "bystander", bodies(100, "b"), false)
			consumeN(t, bystander, "bystander", 100, false)

			// The slow client reads at last: nothing was lost.
			f.stop.Store(true)
			if tt.settled == nil {
				return
			}
			var got atomic.Int64
			readErr := make(chan error, 1)
			go func() {
				for {
					fr, err := r.ReadFrame()
					if err != nil {
						readErr <- err
						return
					}
					if fr.Type != wire.FrameMethod {
						continue
					}
					m, err := wire.DecodeMethod(fr.Payload)
					if err != nil {
						readErr <- err
						return
					}
					got.Store(tt.settled(m, got.Load()))
				}
			}()
			select {
			case err := <-f.done:
				if err != nil {
					t.Fatalf("the slow client's last write: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the broker did not read the client again once it read its output")
			}
			want := f.published()
			eventually.Succeeds(t, 60*time.Second, "every confirm or return", func() error {
				select {
				case err := <-readErr:
					t.Fatalf("reading the output: %v", err)
				default:
				}
				if g := got.Load(); g != want {
					return fmt.Errorf("got %d of %d", g, want)
				}
				return nil
			})
		})
	}
}

// TestProbeNeverReadingClientTimesOut: a connection the broker stopped
// reading because its client does not read its output is closed once the
// client has taken nothing for two heartbeat intervals, as one that misses
// heartbeats; the broker does not hold it forever.
func TestProbeNeverReadingClientTimesOut(t *testing.T) {
	n := brokertest.Start(t, func(c *config.Config) { c.AMQP.Heartbeat = time.Second })
	nc, _ := rawClient(t, n.AMQPAddr(), 1)
	if _, err := nc.Write(wire.AppendMethodFrame(nil, 1, &wire.ConfirmSelect{})); err != nil {
		t.Fatal(err)
	}
	var run []byte
	for range 1000 {
		run = wire.AppendMethodFrame(run, 1, &wire.BasicPublish{RoutingKey: "nowhere"})
		run = wire.AppendHeaderFrame(run, 1, wire.ClassBasic, 0, []byte{0, 0})
	}
	f := flood(nc, run, 1000)
	t.Cleanup(func() { f.stop.Store(true); nc.Close() })
	const maxBytes = 400 << 20
	eventually.Succeeds(t, 30*time.Second, "the broker closes a connection whose client takes no output", func() error {
		if sent := f.published() / 1000 * int64(len(run)); sent > maxBytes {
			t.Fatalf("the broker read %d MB from a client that reads nothing", sent>>20)
		}
		if conns := n.AMQP.Connections(); len(conns) != 0 {
			return fmt.Errorf("%d connections open", len(conns))
		}
		return nil
	})
	select {
	case err := <-f.done:
		if err == nil {
			t.Fatal("the client's writes ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client's blocked write did not fail once the broker closed the connection")
	}
}
