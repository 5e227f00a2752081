package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/brokertest/tmpfs"
)

// diskPublisher publishes 6 KB persistent messages in confirm mode, with a
// window of unconfirmed ones, and keeps what became of each.
type diskPublisher struct {
	t  *testing.T
	ch *amqp091.Channel

	blocked   atomic.Bool
	unblocked chan struct{} // a connection.unblocked arrived

	mu          sync.Mutex
	bodies      []string // by delivery tag - 1
	acked       map[string]bool
	nacked      map[string]bool
	firstBlock  time.Time
	firstNack   time.Time
	outstanding int
	settled     chan struct{} // signalled on every confirm
}

const diskMsgSize = 6 << 10

func newDiskPublisher(t *testing.T, n *brokertest.Node) *diskPublisher {
	conn := n.Dial(t)
	p := &diskPublisher{t: t, unblocked: make(chan struct{}, 16), acked: map[string]bool{}, nacked: map[string]bool{}, settled: make(chan struct{}, 1)}
	// Unbuffered: the client's reader hands over connection.blocked before
	// it reads on, so a nack that follows it on the wire is seen after it.
	blockings := conn.NotifyBlocked(make(chan amqp091.Blocking))
	go func() {
		for b := range blockings {
			p.blocked.Store(b.Active)
			if b.Active {
				p.mu.Lock()
				if p.firstBlock.IsZero() {
					p.firstBlock = time.Now()
				}
				p.mu.Unlock()
			} else {
				p.unblocked <- struct{}{}
			}
		}
	}()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4096))
	go func() {
		for c := range confirms {
			p.mu.Lock()
			body := p.bodies[c.DeliveryTag-1]
			if c.Ack {
				p.acked[body] = true
			} else {
				p.nacked[body] = true
				if p.firstNack.IsZero() {
					p.firstNack = time.Now()
				}
			}
			p.outstanding--
			p.mu.Unlock()
			select {
			case p.settled <- struct{}{}:
			default:
			}
		}
	}()
	p.ch = ch
	return p
}

// publish sends messages to queue, at most window unconfirmed, until n are
// sent or stop says so. It returns how many it sent.
func (p *diskPublisher) publish(queue string, n, window int, stop func() bool) int {
	pad := strings.Repeat("x", diskMsgSize)
	for i := 0; i < n; i++ {
		for {
			p.mu.Lock()
			out := p.outstanding
			p.mu.Unlock()
			if stop() {
				return i
			}
			if out < window {
				break
			}
			select {
			case <-p.settled:
			case <-time.After(10 * time.Millisecond):
			}
		}
		p.mu.Lock()
		body := fmt.Sprintf("m%07d|", len(p.bodies))
		p.bodies = append(p.bodies, body)
		p.outstanding++
		p.mu.Unlock()
		err := p.ch.PublishWithContext(context.Background(), "", queue, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body + pad[:diskMsgSize-len(body)])})
		if err != nil {
			p.t.Errorf("publish: %v", err) // may run on a goroutine: no Fatal
			return i
		}
	}
	return n
}

// counts returns acked, nacked and unconfirmed messages.
func (p *diskPublisher) counts() (acked, nacked, unconfirmed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked), len(p.nacked), p.outstanding
}

// drainDiskQueue consumes queue until it holds nothing more and checks what
// came: every confirmed message exactly once, no nacked one, none flagged
// redelivered.
func drainDiskQueue(t *testing.T, n *brokertest.Node, queue string, p *diskPublisher) {
	t.Helper()
	ch := n.Channel(t)
	acked, nacked, unconfirmed := p.counts()
	// The queue counts what it holds: the confirmed messages (and perhaps
	// some unconfirmed when the broker stopped), none it nacked.
	eventually.Succeeds(t, 10*time.Second, "queue length", func() error {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil {
			return err
		}
		if q.Messages < acked || q.Messages > acked+unconfirmed {
			return fmt.Errorf("queue holds %d messages, want %d confirmed (+ up to %d unconfirmed)", q.Messages, acked, unconfirmed)
		}
		return nil
	})
	if err := ch.Qos(1000, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var redelivered, total int
	var mu sync.Mutex
	go func() {
		for d := range deliveries {
			mu.Lock()
			id, _, _ := strings.Cut(string(d.Body), "|")
			seen[id+"|"]++
			total++
			if d.Redelivered {
				redelivered++
			}
			mu.Unlock()
			_ = d.Ack(false)
		}
	}()
	eventually.True(t, 60*time.Second, "every confirmed message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total >= acked
	})
	eventually.Holds(t, 300*time.Millisecond, "no more deliveries", func() error {
		mu.Lock()
		defer mu.Unlock()
		if total > acked+unconfirmed {
			return fmt.Errorf("%d deliveries for %d confirmed messages (and %d unconfirmed)", total, acked, unconfirmed)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	for body := range p.acked {
		if seen[body] != 1 {
			t.Errorf("confirmed message %s delivered %d times", body, seen[body])
		}
	}
	published := map[string]bool{}
	for _, body := range p.bodies {
		published[body] = true
	}
	for body, c := range seen {
		switch {
		case p.nacked[body]:
			t.Errorf("message %s was nacked to its publisher and delivered %d times", body, c)
		case !published[body]:
			t.Errorf("message %s delivered %d times and never published", body, c)
		case !p.acked[body] && c > 1:
			// Unconfirmed when the broker stopped: it may or may not be
			// there, but once at most.
			t.Errorf("unconfirmed message %s delivered %d times", body, c)
		}
	}
	if redelivered > 0 {
		t.Errorf("%d of %d deliveries flagged redelivered; none was delivered before", redelivered, total)
	}
	t.Logf("drained %d distinct messages in %d deliveries: %d confirmed, %d nacked", len(seen), total, acked, nacked)
}

// startOnTmpfs starts a node whose data directory is on a tmpfs of size
// bytes, with a filler file of fill bytes beside it.
func startOnTmpfs(t *testing.T, size, fill, diskFreeLimit int64) (*brokertest.Node, string, string) {
	mnt := tmpfs.Mount(t, size)
	filler := filepath.Join(mnt, "filler")
	tmpfs.Fill(t, filler, fill)
	cfg := brokertest.Config(filepath.Join(mnt, "data"))
	cfg.Limits.DiskFreeLimit = diskFreeLimit
	return brokertest.StartConfig(t, cfg), mnt, filler
}

// TestProbeDiskFull: publishers on a disk that fills up. The disk alarm
// blocks them with its margin intact when they are the ones filling it
// (what they are about to write is checked against the free space, not
// only once a second); when something else fills the disk, the writes that
// find it full are nacked and the alarm is raised at once. Either way the
// broker recovers by itself when space comes back, never delivers a message
// it nacked or twice, and stops cleanly.
func TestProbeDiskFull(t *testing.T) {
	t.Run("alarm keeps its margin", func(t *testing.T) {
		const limit = 16 << 20
		n, mnt, filler := startOnTmpfs(t, 64<<20, 24<<20, limit)
		ch := n.Channel(t)
		if _, err := ch.QueueDeclare("fill", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		p := newDiskPublisher(t, n)
		sent := p.publish("fill", 20000, 256, p.blocked.Load)
		if !p.blocked.Load() {
			t.Fatalf("published %d messages of 6 KB on a 64 MB disk and the disk alarm never blocked them", sent)
		}
		free := tmpfs.Free(t, mnt)
		acked, nacked, _ := p.counts()
		if nacked > 0 {
			t.Fatalf("%d publishes nacked: the disk filled before the alarm blocked its publishers (free %d bytes)", nacked, free)
		}
		if free < limit/2 {
			t.Fatalf("blocked with %d bytes free: the alarm's margin (%d) was not kept", free, limit)
		}
		t.Logf("blocked after %d publishes (%d confirmed), %d bytes free", sent, acked, free)

		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		waitUnblocked(t, p)
		p.publish("fill", 200, 256, func() bool { return false })
		eventually.True(t, 30*time.Second, "every publish confirmed", func() bool {
			_, _, out := p.counts()
			return out == 0
		})
		if _, nacked, _ := p.counts(); nacked > 0 {
			t.Fatalf("%d publishes nacked", nacked)
		}
		drainDiskQueue(t, n, "fill", p)
		n.Stop()
	})

	t.Run("ENOSPC is nacked and recovered from", func(t *testing.T) {
		n, mnt, filler := startOnTmpfs(t, 64<<20, 4<<20, 1<<20)
		ch := n.Channel(t)
		if _, err := ch.QueueDeclare("full", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		p := newDiskPublisher(t, n)
		p.publish("full", 2500, 64, func() bool { return false }) // past the in-memory window: later ones spill to disk
		// Something else takes every byte left: the broker's writes find
		// the disk full before its once-a-second sample does.
		var stopped atomic.Bool
		done := make(chan int)
		go func() {
			done <- p.publish("full", 1<<30, 64, func() bool { return p.blocked.Load() || stopped.Load() })
		}()
		tmpfs.Fill(t, filepath.Join(mnt, "filler2"), -1)
		eventually.True(t, 10*time.Second, "the disk alarm blocks the publisher", p.blocked.Load)
		stopped.Store(true)
		sent := <-done
		acked, nacked, out := p.counts()
		t.Logf("blocked: %d sent, %d confirmed, %d nacked, %d unconfirmed", 2500+sent, acked, nacked, out)
		p.mu.Lock()
		firstBlock, firstNack := p.firstBlock, p.firstNack
		p.mu.Unlock()
		if !firstNack.IsZero() && firstBlock.After(firstNack.Add(100*time.Millisecond)) {
			t.Errorf("the first nack came %v before connection.blocked: the alarm must be raised at the first ENOSPC", firstBlock.Sub(firstNack))
		}
		if nacked == 0 {
			t.Log("no write met ENOSPC this time: the once-a-second sample raised the alarm first")
		}

		for _, f := range []string{filler, filepath.Join(mnt, "filler2")} {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		waitUnblocked(t, p)
		before, _, _ := p.counts()
		p.publish("full", 200, 64, func() bool { return false })
		eventually.True(t, 30*time.Second, "every publish confirmed or nacked", func() bool {
			_, _, out := p.counts()
			return out == 0
		})
		if after, _, _ := p.counts(); after < before+200 {
			t.Fatalf("after space came back %d of 200 publishes were confirmed: the store did not recover", after-before)
		}
		drainDiskQueue(t, n, "full", p)
		n.Stop()
	})
}

// TestProbeDiskFullShutdown stops a broker whose disk is full: it exits
// cleanly (no error from the store), and after space is freed and it
// restarts, every message it confirmed is there once and none it nacked.
func TestProbeDiskFullShutdown(t *testing.T) {
	n, mnt, filler := startOnTmpfs(t, 64<<20, 4<<20, 1<<20)
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("full", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	p := newDiskPublisher(t, n)
	p.publish("full", 300, 64, func() bool { return false })
	tmpfs.Fill(t, filepath.Join(mnt, "filler2"), -1)
	p.publish("full", 1000, 64, p.blocked.Load)
	eventually.True(t, 10*time.Second, "the disk alarm blocks the publisher", p.blocked.Load)
	n.Stop() // fails the test if shutdown returns an error
	acked, nacked, out := p.counts()
	t.Logf("stopped on a full disk: %d confirmed, %d nacked, %d unconfirmed", acked, nacked, out)

	for _, f := range []string{filler, filepath.Join(mnt, "filler2")} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	n2 := brokertest.StartConfig(t, n.Cfg)
	drainDiskQueue(t, n2, "full", p)
	n2.Stop()
}

func waitUnblocked(t *testing.T, p *diskPublisher) {
	t.Helper()
	select {
	case <-p.unblocked:
	case <-time.After(10 * time.Second):
		t.Fatal("space came back and the disk alarm did not clear")
	}
}
