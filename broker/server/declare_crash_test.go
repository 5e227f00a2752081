package server_test

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// TestKill9KeepsDeclaredQueues: connections declare durable queues as fast
// as they can, each publishing one persistent message with a confirm to
// the queue it was just told exists; the broker is killed with SIGKILL in
// the middle, while queues are still being recorded and opened (a queue's
// files are created off the metadata's apply goroutine). After a restart
// every queue that got declare-ok exists, and holds its confirmed message.
func TestKill9KeepsDeclaredQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the warren binary")
	}
	bin := brokertest.BuildWarren(t)
	dir := t.TempDir()
	port := brokertest.FreePort(t)
	p := startProcess(t, bin, dir, port)

	const workers = 8
	var mu sync.Mutex
	declared := map[string]bool{}  // declare-ok received
	confirmed := map[string]bool{} // its message confirmed
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := amqp091.Dial(p.url())
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				return
			}
			if err := ch.Confirm(false); err != nil {
				return
			}
			acks := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
			for i := 0; ; i++ {
				name := fmt.Sprintf("dq-%d-%d", w, i)
				if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
					return // the broker died
				}
				mu.Lock()
				declared[name] = true
				mu.Unlock()
				if err := ch.Publish("", name, false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(name)}); err != nil {
					return
				}
				c, ok := <-acks
				if !ok {
					return
				}
				if c.Ack {
					mu.Lock()
					confirmed[name] = true
					mu.Unlock()
				}
			}
		}()
	}
	eventually.True(t, 30*time.Second, "200 queues declared", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(declared) >= 200
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	_ = p.cmd.Wait()
	wg.Wait()

	p2 := startProcess(t, bin, dir, port)
	conn, err := amqp091.Dial(p2.url())
	if err != nil {
		t.Fatalf("dial after restart: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for name := range declared {
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("queue %s got declare-ok before kill -9 and is gone after it: %v", name, err)
		}
		if confirmed[name] && q.Messages != 1 {
			t.Fatalf("queue %s holds %d messages after kill -9, want its confirmed one", name, q.Messages)
		}
	}
	t.Logf("%d queues declared before kill -9 (%d with a confirmed message), all there", len(declared), len(confirmed))
	_ = os.Remove(bin)
}
