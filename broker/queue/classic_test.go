package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/store"
)

// testConsumer is a real queue.Consumer: it records deliveries and has a
// credit counter like a channel's prefetch.
type testConsumer struct {
	mu        sync.Mutex
	credit    int // -1: unlimited
	noAck     bool
	got       []Delivery
	cancelled bool
	arrived   chan struct{}
}

func newConsumer(credit int, noAck bool) *testConsumer {
	return &testConsumer{credit: credit, noAck: noAck, arrived: make(chan struct{}, 1<<16)}
}

func (c *testConsumer) Deliver(d Delivery) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.credit == 0 {
		return false
	}
	if c.credit > 0 {
		c.credit--
	}
	c.got = append(c.got, d)
	c.arrived <- struct{}{}
	return true
}

func (c *testConsumer) NoAck() bool { return c.noAck }

func (c *testConsumer) Flush() {}

func (c *testConsumer) Cancelled() {
	c.mu.Lock()
	c.cancelled = true
	c.mu.Unlock()
}

func (c *testConsumer) wait(t *testing.T, n int) []Delivery {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		if len(c.got) >= n {
			out := append([]Delivery(nil), c.got...)
			c.mu.Unlock()
			return out
		}
		c.mu.Unlock()
		select {
		case <-c.arrived:
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("got %d deliveries, want %d", len(c.got), n)
		}
	}
}

// testHost is a real queue.Host that records dead-lettered messages.
type testHost struct {
	mu      sync.Mutex
	dead    []*message.Message
	expired int
	id      uint64
}

func (h *testHost) DeadLetter(exchange string, msgs []*message.Message) {
	h.mu.Lock()
	h.dead = append(h.dead, msgs...)
	h.mu.Unlock()
}
func (h *testHost) Expired(q Queue) { h.mu.Lock(); h.expired++; h.mu.Unlock() }
func (h *testHost) NewMessageID() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.id++
	return 1<<40 + h.id
}

type confirms struct {
	mu  sync.Mutex
	ack map[uint64]bool
}

func (c *confirms) Confirm(tags []uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tags {
		c.ack[t] = ok
	}
}

type fixture struct {
	t    *testing.T
	dir  string
	vs   *store.VhostStore
	host *testHost
	q    *Classic
	cfg  ClassicConfig
	ids  uint64
}

func open(t *testing.T, dir string, info Info, args map[string]any, mem int) *fixture {
	t.Helper()
	vs, err := store.OpenVhost(context.Background(), store.VhostConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, vs: vs, host: &testHost{}}
	f.cfg = ClassicConfig{Info: info, Args: a, Store: vs, StoreOptions: store.Options{Version: 2, EmbedBelow: 4096}, MemoryMessages: mem, Host: f.host}
	q, err := OpenClassic(context.Background(), f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	vs.RecoveryDone()
	f.q = q
	t.Cleanup(func() {
		_ = q.Close(context.Background())
		_ = vs.Close()
	})
	return f
}

// reopenAfterCrash opens the queue's files again without closing the
// running queue: what a restart after kill -9 finds. The test's cleanup
// closes both.
func (f *fixture) reopenAfterCrash() *Classic {
	f.t.Helper()
	vs, err := store.OpenVhost(context.Background(), store.VhostConfig{Dir: f.dir})
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := f.cfg
	cfg.Store = vs
	q, err := OpenClassic(context.Background(), cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		_ = q.Close(context.Background())
		_ = vs.Close()
	})
	return q
}

func (f *fixture) msg(body string, persistent bool) *message.Message {
	f.ids++
	return &message.Message{ID: f.ids, RoutingKey: "k", Body: []byte(body), Persistent: persistent, Timestamp: time.Now().UnixNano(), Props: (&wire.Properties{}).Append(nil)}
}

func (f *fixture) publish(bodies ...string) {
	for _, b := range bodies {
		f.q.Publish([]Publish{{Msg: f.msg(b, true)}})
	}
}

func TestConsumeOrderAckAndRequeueKeepsPlace(t *testing.T) {
	f := open(t, t.TempDir(), Info{Name: "q", Durable: true}, nil, 100)
	f.publish("a", "b", "c", "d")
	c := newConsumer(3, false)
	if err := f.q.Consume(context.Background(), c, ConsumeOptions{}); err != nil {
		t.Fatal(err)
	}
	got := c.wait(t, 3)
	if string(got[0].Msg.Body) != "a" || string(got[2].Msg.Body) != "c" {
		t.Fatalf("order: %q %q", got[0].Msg.Body, got[2].Msg.Body)
	}
	// The counters are published once the turn has offered d too (and
	// been refused): only then may the credit come back.
	waitStats(t, f.q, func(s Stats) bool { return s.Unacked == 3 })
	f.q.Requeue([]uint64{got[1].Seq})
	f.q.Ack([]uint64{got[0].Seq, got[2].Seq})
	c.mu.Lock()
	c.credit = 2
	c.mu.Unlock()
	f.q.Wake(nil)
	got = c.wait(t, 5)
	if string(got[3].Msg.Body) != "b" || !got[3].Redelivered || string(got[4].Msg.Body) != "d" {
		t.Fatalf("after requeue got %q(redelivered=%v) then %q, want b redelivered then d", got[3].Msg.Body, got[3].Redelivered, got[4].Msg.Body)
	}
}

func TestConfirmsWaitForFsyncOnDurableQueues(t *testing.T) {
	f := open(t, t.TempDir(), Info{Name: "q", Durable: true}, nil, 100)
	cf := &confirms{ack: map[uint64]bool{}}
	for i := uint64(1); i <= 50; i++ {
		f.q.Publish([]Publish{{Msg: f.msg(fmt.Sprint(i), true), Confirm: cf, Tag: i}})
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		cf.mu.Lock()
		n := len(cf.ack)
		cf.mu.Unlock()
		if n == 50 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cf.mu.Lock()
	defer cf.mu.Unlock()
	for i := uint64(1); i <= 50; i++ {
		if !cf.ack[i] {
			t.Fatalf("tag %d not confirmed", i)
		}
	}
}

func TestBoundedMemoryWithLongQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 100k messages")
	}
	dir := t.TempDir()
	f := open(t, dir, Info{Name: "long", Durable: true}, nil, 100)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 100000
	batch := make([]Publish, 0, 1000)
	for i := 0; i < n; i++ {
		batch = append(batch, Publish{Msg: f.msg(fmt.Sprintf("%08d", i), i%2 == 0)})
		if len(batch) == cap(batch) {
			f.q.Publish(batch)
			batch = make([]Publish, 0, 1000)
			if err := f.q.Throttle(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := waitStats(t, f.q, func(s Stats) bool { return s.Ready == n })
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Fatalf("heap grew %d MiB for %d queued messages; the window should bound it", grew>>20, st.Ready)
	}
	c := newConsumer(-1, true)
	if err := f.q.Consume(context.Background(), c, ConsumeOptions{}); err != nil {
		t.Fatal(err)
	}
	got := c.wait(t, n)
	for i, d := range got {
		if want := fmt.Sprintf("%08d", i); string(d.Msg.Body) != want {
			t.Fatalf("delivery %d = %q, want %q", i, d.Msg.Body, want)
		}
	}
}

func waitStats(t *testing.T, q Queue, ok func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := q.Stats()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never reached the condition: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRecoveryAfterCrash(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir, Info{Name: "r", Durable: true}, nil, 10)
	for i := 0; i < 30; i++ {
		f.q.Publish([]Publish{{Msg: f.msg(fmt.Sprint(i), i%3 != 0)}})
	}
	cf := &confirms{ack: map[uint64]bool{}}
	f.q.Publish([]Publish{{Msg: f.msg("last", true), Confirm: cf, Tag: 1}})
	waitStats(t, f.q, func(s Stats) bool { return s.Ready == 31 })
	for {
		cf.mu.Lock()
		done := cf.ack[1]
		cf.mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// A consumer takes the first 4 messages (2 persistent: "1", "2") and
	// never acks them: they come back redelivered, the others not.
	early := newConsumer(4, false)
	if err := f.q.Consume(context.Background(), early, ConsumeOptions{}); err != nil {
		t.Fatal(err)
	}
	early.wait(t, 4)
	waitStats(t, f.q, func(s Stats) bool { return s.Unacked == 4 })
	q2 := f.reopenAfterCrash()
	st := waitStats(t, q2, func(s Stats) bool { return true })
	if st.Ready != 21 {
		t.Fatalf("recovered %d messages, want the 21 persistent ones", st.Ready)
	}
	c := newConsumer(-1, true)
	_ = q2.Consume(context.Background(), c, ConsumeOptions{})
	got := c.wait(t, 21)
	if string(got[20].Msg.Body) != "last" {
		t.Fatalf("last = %q", got[20].Msg.Body)
	}
	for _, d := range got {
		body := string(d.Msg.Body)
		if want := body == "1" || body == "2"; d.Redelivered != want {
			t.Errorf("message %q: redelivered = %v, want %v (only delivered messages are flagged)", body, d.Redelivered, want)
		}
	}
}

// Messages taken with auto-ack (a consumer or a no-ack get) are gone for
// good once the client could have seen them, spilled to disk or not: a
// restart after kill -9 brings none back. The queue acks them in the index
// in batches, before the turn's deliveries are flushed.
func TestAutoAckedMessagesDoNotComeBackAfterCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		mem  int // the in-memory window: 10 spills most of the 300 to disk
	}{{"in memory", 1000}, {"spilled", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			f := open(t, t.TempDir(), Info{Name: "aa", Durable: true}, nil, tc.mem)
			const n = 300
			for i := 0; i < n; i++ {
				f.q.Publish([]Publish{{Msg: f.msg(fmt.Sprint(i), i%3 != 0)}})
			}
			waitStats(t, f.q, func(s Stats) bool { return s.Ready == n })
			if _, ok, err := f.q.Get(context.Background(), true); err != nil || !ok {
				t.Fatalf("get: ok %v, err %v", ok, err)
			}
			c := newConsumer(-1, true)
			if err := f.q.Consume(context.Background(), c, ConsumeOptions{}); err != nil {
				t.Fatal(err)
			}
			got := c.wait(t, n-1)
			for i, d := range got {
				if want := fmt.Sprint(i + 1); string(d.Msg.Body) != want {
					t.Fatalf("delivery %d = %q, want %q", i, d.Msg.Body, want)
				}
			}
			waitStats(t, f.q, func(s Stats) bool { return s.Ready == 0 && s.Acked == n })
			q2 := f.reopenAfterCrash()
			if st := waitStats(t, q2, func(Stats) bool { return true }); st.Ready != 0 {
				t.Fatalf("after a crash the queue holds %d messages, want 0: all %d were taken with auto-ack", st.Ready, n)
			}
		})
	}
}

func TestTTLAndDeadLetteringXDeath(t *testing.T) {
	f := open(t, t.TempDir(), Info{Name: "ttl", Durable: true}, map[string]any{"x-message-ttl": int32(20), "x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "dead"}, 100)
	f.publish("old")
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.host.mu.Lock()
		n := len(f.host.dead)
		f.host.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("expired message was not dead-lettered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	m := f.host.dead[0]
	props, err := wire.DecodeProperties(m.Props)
	if err != nil {
		t.Fatal(err)
	}
	deaths, _ := props.Headers["x-death"].([]any)
	if len(deaths) != 1 || m.RoutingKey != "dead" || m.Exchange != "dlx" {
		t.Fatalf("dead-lettered %+v with x-death %v", m, props.Headers["x-death"])
	}
	d := deaths[0].(wire.Table)
	if d["reason"] != "expired" || d["queue"] != "ttl" || d["count"] != int64(1) || props.Headers["x-first-death-reason"] != "expired" {
		t.Fatalf("x-death = %v", d)
	}
	if st := f.q.Stats(); st.Ready != 0 {
		t.Fatalf("%d messages left after expiry", st.Ready)
	}
}

func TestMaxLengthOverflow(t *testing.T) {
	tests := []struct {
		overflow string
		want     []string
		nacked   int
	}{
		{"drop-head", []string{"3", "4"}, 0},
		{"reject-publish", []string{"0", "1"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.overflow, func(t *testing.T) {
			f := open(t, t.TempDir(), Info{Name: "cap", Durable: true}, map[string]any{"x-max-length": int64(2), "x-overflow": tt.overflow}, 100)
			cf := &confirms{ack: map[uint64]bool{}}
			for i := 0; i < 5; i++ {
				f.q.Publish([]Publish{{Msg: f.msg(fmt.Sprint(i), true), Confirm: cf, Tag: uint64(i + 1)}})
			}
			waitStats(t, f.q, func(s Stats) bool { return s.Published == 5 })
			time.Sleep(50 * time.Millisecond)
			var got []string
			for {
				d, ok, err := f.q.Get(context.Background(), true)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				got = append(got, string(d.Msg.Body))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("queue kept %v, want %v", got, tt.want)
			}
			cf.mu.Lock()
			nacked := 0
			for _, ok := range cf.ack {
				if !ok {
					nacked++
				}
			}
			cf.mu.Unlock()
			if nacked != tt.nacked {
				t.Fatalf("%d nacked, want %d", nacked, tt.nacked)
			}
		})
	}
}

func TestSingleActiveConsumerAndExclusive(t *testing.T) {
	f := open(t, t.TempDir(), Info{Name: "sac", Durable: true}, map[string]any{"x-single-active-consumer": true}, 100)
	first, second := newConsumer(-1, true), newConsumer(-1, true)
	_ = f.q.Consume(context.Background(), first, ConsumeOptions{})
	_ = f.q.Consume(context.Background(), second, ConsumeOptions{})
	f.publish("1", "2", "3")
	first.wait(t, 3)
	if len(second.got) != 0 {
		t.Fatalf("inactive consumer got %d messages", len(second.got))
	}
	f.q.Cancel(first)
	f.publish("4")
	if got := second.wait(t, 1); string(got[0].Msg.Body) != "4" {
		t.Fatalf("second consumer got %q", got[0].Msg.Body)
	}
	g := open(t, t.TempDir(), Info{Name: "ex", Durable: true}, nil, 100)
	if err := g.q.Consume(context.Background(), newConsumer(1, false), ConsumeOptions{Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	if err := g.q.Consume(context.Background(), newConsumer(1, false), ConsumeOptions{}); err != ErrExclusiveConsumer {
		t.Fatalf("consume next to an exclusive consumer: %v", err)
	}
}

func TestPriorities(t *testing.T) {
	f := open(t, t.TempDir(), Info{Name: "prio", Durable: true}, map[string]any{"x-max-priority": int32(5)}, 100)
	for i, p := range []uint8{1, 9, 3, 0, 5} {
		m := f.msg(fmt.Sprintf("p%d-%d", p, i), true)
		m.Priority = p
		f.q.Publish([]Publish{{Msg: m}})
	}
	waitStats(t, f.q, func(s Stats) bool { return s.Ready == 5 })
	var got []string
	for i := 0; i < 5; i++ {
		d, ok, _ := f.q.Get(context.Background(), true)
		if !ok {
			t.Fatal("queue ran dry")
		}
		got = append(got, string(d.Msg.Body))
	}
	// 9 is capped at 5, equal to p5: arrival order decides.
	if want := "[p9-1 p5-4 p3-2 p1-0 p0-3]"; fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestAutoDeleteAndDelete(t *testing.T) {
	f := open(t, t.TempDir(), Info{Name: "ad", AutoDelete: true}, nil, 100)
	c := newConsumer(-1, true)
	_ = f.q.Consume(context.Background(), c, ConsumeOptions{})
	f.q.Cancel(c)
	waitStats(t, f.q, func(s Stats) bool { return s.Consumers == 0 })
	time.Sleep(20 * time.Millisecond)
	f.host.mu.Lock()
	expired := f.host.expired
	f.host.mu.Unlock()
	if expired != 1 {
		t.Fatalf("auto-delete queue asked for deletion %d times, want 1", expired)
	}
	g := open(t, t.TempDir(), Info{Name: "del", Durable: true}, nil, 100)
	g.publish("x", "y")
	waitStats(t, g.q, func(s Stats) bool { return s.Ready == 2 })
	c2 := newConsumer(0, false)
	_ = g.q.Consume(context.Background(), c2, ConsumeOptions{})
	if _, err := g.q.Delete(context.Background(), true, false); err != ErrInUse {
		t.Fatalf("delete if-unused with a consumer: %v", err)
	}
	n, err := g.q.Delete(context.Background(), false, false)
	if err != nil || n != 2 {
		t.Fatalf("delete = %d, %v; want 2 messages", n, err)
	}
	if !c2.cancelled {
		t.Fatal("consumer not told its queue was deleted")
	}
}

func BenchmarkPublishDeliverAck(b *testing.B) {
	vs, err := store.OpenVhost(context.Background(), store.VhostConfig{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer vs.Close()
	q, err := OpenClassic(context.Background(), ClassicConfig{Info: Info{Name: "bench"}, Args: Args{MaxLength: -1, MaxLengthBytes: -1, Overflow: "drop-head"}, Store: vs, MemoryMessages: 2048, Host: &testHost{}})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close(context.Background())
	c := newConsumer(-1, true)
	c.arrived = make(chan struct{}, b.N+1)
	_ = q.Consume(context.Background(), c, ConsumeOptions{})
	body := make([]byte, 12)
	b.ResetTimer()
	for i := 0; i < b.N; i += 100 {
		batch := make([]Publish, 0, 100)
		for j := 0; j < 100 && i+j < b.N; j++ {
			batch = append(batch, Publish{Msg: &message.Message{ID: uint64(i + j + 1), Body: body}})
		}
		q.Publish(batch)
		_ = q.Throttle(context.Background())
	}
	for n := 0; n < b.N; n++ {
		<-c.arrived
	}
}

// TestFlowControlKeepsAConsumedQueueInMemory: a publisher faster than the
// queue's consumer is held back once the backlog (with what is in flight)
// passes half the in-memory window, so a queue whose consumer is taking
// messages stays in memory instead of paging them through disk.
func TestFlowControlKeepsAConsumedQueueInMemory(t *testing.T) {
	const window, total, batchSize = 400, 20000, 50
	f := open(t, t.TempDir(), Info{Name: "paced"}, nil, window)
	c := newConsumer(0, true)
	if err := f.q.Consume(context.Background(), c, ConsumeOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() { // the consumer: 25 messages of credit every millisecond
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				c.mu.Lock()
				c.credit += 25
				c.mu.Unlock()
				f.q.Wake(nil)
			}
		}
	}()
	// Flow control holds publishers back only while consumers are taking
	// messages: the first batch goes in before the consumer's first one.
	maxReady := 0
	for i := 0; i < total; i += batchSize {
		if i == batchSize {
			c.wait(t, 1)
		}
		batch := make([]Publish, 0, batchSize)
		for j := 0; j < batchSize; j++ {
			batch = append(batch, Publish{Msg: f.msg(fmt.Sprintf("%08d", i+j), false)})
		}
		f.q.Publish(batch)
		if err := f.q.Throttle(context.Background()); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			maxReady = max(maxReady, f.q.Stats().Ready)
		}
	}
	got := c.wait(t, total)
	for i, d := range got {
		if want := fmt.Sprintf("%08d", i); string(d.Msg.Body) != want {
			t.Fatalf("delivery %d = %q, want %q", i, d.Msg.Body, want)
		}
	}
	if limit := window/2 + 2*batchSize; maxReady > limit {
		t.Fatalf("the backlog reached %d messages with the consumer taking them; flow control should keep it under %d (half the window of %d, and a batch in flight)", maxReady, limit, window)
	}
}

// A get or purge in the same turn as publishes acts on messages already in
// the index: a message got with no ack, or purged, does not come back
// after a crash, and nothing is handed out before it was written.
func TestGetAndPurgeInThePublishingTurn(t *testing.T) {
	tests := []struct {
		name string
		take func(t *testing.T, q *Classic)
	}{
		{"get with no ack", func(t *testing.T, q *Classic) {
			d, ok, err := q.Get(context.Background(), true)
			if err != nil || !ok || string(d.Msg.Body) != "m" {
				t.Errorf("get: %q %v %v, want the message just published", d.Msg.Body, ok, err)
			}
		}},
		{"purge", func(t *testing.T, q *Classic) {
			if n, err := q.Purge(context.Background()); err != nil || n != 1 {
				t.Errorf("purge: %d %v, want 1", n, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			f := open(t, dir, Info{Name: "q", Durable: true}, nil, 100)
			// Hold the queue's turn while the publish and the get (or purge)
			// reach its inbox, so that one turn applies both.
			f.q.turnMu.Lock()
			f.q.Publish([]Publish{{Msg: f.msg("m", true)}})
			done := make(chan struct{})
			go func() { defer close(done); tt.take(t, f.q) }()
			eventually.True(t, 5*time.Second, "publish and take in the inbox", func() bool {
				f.q.mu.Lock()
				defer f.q.mu.Unlock()
				return len(f.q.inbox) == 2
			})
			f.q.turnMu.Unlock()
			<-done
			q2 := f.reopenAfterCrash()
			if st := waitStats(t, q2, func(Stats) bool { return true }); st.Ready != 0 {
				t.Fatalf("after a crash the queue has %d messages, want 0: the message was taken", st.Ready)
			}
		})
	}
}
