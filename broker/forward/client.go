package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/warrenmq/warren/broker/cluster/transport"
	"github.com/warrenmq/warren/broker/queue"
)

// Methods of the node-level calls.
const (
	methodPublish = "forward.publish"
	methodStats   = "forward.stats"
	methodGet     = "forward.get"
	methodSettle  = "forward.settle"
	methodPurge   = "forward.purge"
	methodDelete  = "forward.delete"
)

// Config configures a Client.
type Config struct {
	Network transport.Network
	// Errors maps an error that crossed from the owner (a gRPC status) to
	// the caller's errors; nil leaves it as is.
	Errors func(error) error
	Log    *slog.Logger
	// MaxBatchBytes bounds one publish call (default 1 MiB; a single
	// larger message goes alone).
	MaxBatchBytes int
	// MaxInFlight is the publish calls in flight per node (default 3:
	// the messages queued while they are under way make the next call
	// bigger; with 8, a forwarded s5, 100 unconfirmed messages, made calls
	// of about 24 messages, with 3 about 35, each a frame both ways, and
	// their round trip fell from 333 to 267 µs).
	MaxInFlight int
	// HighWater is the bytes outstanding to a node above which Throttle
	// blocks (default 16 MiB).
	HighWater int
	// CallTimeout bounds a publish call (default 30 s): its messages are
	// nacked when it ends.
	CallTimeout time.Duration
}

// answersReader is a Network whose readers run a function once they have
// handed over the answers they read (transport.GRPCNetwork.OnAnswersRead).
// On one, the confirms of publish answers are left in their publishers'
// output (queue.DeferredConfirmer) and written by that function, once for
// all the answers of a read, instead of waking each publisher's
// connection writer; on another Network each answer's confirms go at once.
type answersReader interface {
	OnAnswersRead(fn func()) (stop func())
}

// Client makes proxies of queues other nodes hold and sends what they are
// given. Safe for concurrent use.
type Client struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	nodes      map[string]*sender
	subs       map[uint64]*sub
	byConsumer map[queue.Consumer]*sub
	nextID     atomic.Uint64
	unwatch    func()

	// ctx ends at Close: the calls under way end with it (their messages
	// nacked); wg counts the goroutines that send and settle.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool // under mu

	// deferred holds the confirmers of answers read on a Network that is
	// an answersReader (deferring set); stopDeferring unregisters its flush.
	deferring     bool
	deferred      deferredConfirms
	stopDeferring func()
}

// deferredConfirms are the confirmers that confirmed answers' messages
// without writing them yet; the Network's readers flush them.
type deferredConfirms struct {
	n    atomic.Int32 // len(list), read without mu
	mu   sync.Mutex   // a leaf
	list []queue.DeferredConfirmer
}

// add has dc flushed by the next flush.
func (d *deferredConfirms) add(dc queue.DeferredConfirmer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Contains(d.list, dc) {
		d.list = append(d.list, dc)
		d.n.Store(int32(len(d.list)))
	}
}

// flush writes what the deferred confirmers hold. It runs on the
// Network's readers (answersReader), many at once.
func (d *deferredConfirms) flush() {
	if d.n.Load() == 0 {
		return
	}
	d.mu.Lock()
	list := d.list
	d.list = nil
	d.n.Store(0)
	d.mu.Unlock()
	for _, dc := range list {
		dc.Flush()
	}
}

// NewClient returns a Client on cfg.Network.
func NewClient(cfg Config) *Client {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Errors == nil {
		cfg.Errors = func(err error) error { return err }
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = 1 << 20
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 3
	}
	if cfg.HighWater <= 0 {
		cfg.HighWater = 16 << 20
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	cl := &Client{cfg: cfg, log: cfg.Log.With("subsystem", "forward"), nodes: map[string]*sender{}, subs: map[uint64]*sub{}, byConsumer: map[queue.Consumer]*sub{}}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	if r, ok := cfg.Network.(answersReader); ok {
		cl.deferring = true
		cl.stopDeferring = r.OnAnswersRead(cl.deferred.flush)
	}
	// Deliveries are handed to the consumer where they are read, in the
	// order sent: handleDeliver never blocks (a consumer refuses what it
	// cannot take now).
	cfg.Network.HandleInline(methodDeliver, cl.handleDeliver)
	cfg.Network.Handle(methodCancelled, cl.handleCancelled)
	cl.unwatch = cfg.Network.Watch(cl.peerChanged)
	return cl
}

// Close stops following the peers' state and ends the publish calls and
// settlements under way: the messages not yet confirmed by their owner are
// nacked (so are those published later). It returns once the goroutines
// that sent them have ended.
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	senders := make([]*sender, 0, len(c.nodes))
	for _, s := range c.nodes {
		senders = append(senders, s)
	}
	c.mu.Unlock()
	c.unwatch()
	c.cancel()
	for _, s := range senders {
		s.close()
	}
	c.wg.Wait() // every answer handed over: nothing is deferred after this
	if c.stopDeferring != nil {
		c.stopDeferring()
	}
	c.deferred.flush()
}

// errClosed nacks what is published through a closed Client.
var errClosed = errors.New("forward: the node is shutting down")

// track counts a call under way for Close to wait for (wg.Done when it is
// answered); false once the Client is closed.
func (c *Client) track() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// goroutine runs fn on a goroutine Close waits for; false (fn not run)
// once the Client is closed.
func (c *Client) goroutine(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// Queue returns a proxy of the queue info names, held by node.
func (c *Client) Queue(info queue.Info, node string) queue.Queue {
	return &Queue{c: c, info: info, node: node, s: c.sender(node)}
}

func (c *Client) sender(node string) *sender {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.nodes[node]
	if !ok {
		s = &sender{c: c, node: node, closed: c.closed}
		c.nodes[node] = s
	}
	return s
}

// Queue is a proxy of a queue another node holds.
type Queue struct {
	c    *Client
	info queue.Info
	node string
	s    *sender

	// Settlements queued or under way (settle.go).
	st settler
}

// Node is the node that holds the queue.
func (q *Queue) Node() string { return q.node }

// Info implements queue.Queue.
func (q *Queue) Info() queue.Info { return q.info }

// Publish implements queue.Queue: the batch goes to the owner with the
// next call to its node.
func (q *Queue) Publish(batch []queue.Publish) { q.s.add(q, batch) }

// Throttle implements queue.Queue: it blocks while too much is
// outstanding to the owner.
func (q *Queue) Throttle(ctx context.Context) error { return q.s.throttle(ctx) }

// Ack implements queue.Queue (a basic.get's delivery through this node).
func (q *Queue) Ack(seqs []uint64) { q.settle(settleAck, seqs) }

// Requeue implements queue.Queue.
func (q *Queue) Requeue(seqs []uint64) { q.settle(settleRequeue, seqs) }

// Reject implements queue.Queue.
func (q *Queue) Reject(seqs []uint64) { q.settle(settleReject, seqs) }

// Get implements queue.Queue (basic.get on the owner).
func (q *Queue) Get(ctx context.Context, noAck bool) (queue.Delivery, bool, error) {
	var flag byte
	if noAck {
		flag = 1
	}
	ans, err := q.call(ctx, methodGet, append(appendQueueRef(nil, q.info.Vhost, q.info.Name), flag))
	if err != nil {
		return queue.Delivery{}, false, err
	}
	d, ok, err := decodeDelivery(ans)
	if err != nil {
		return queue.Delivery{}, false, fmt.Errorf("forward: get from node %s: %w", q.node, err)
	}
	d.Queue = q
	return d, ok, nil
}

// Purge implements queue.Queue.
func (q *Queue) Purge(ctx context.Context) (int, error) {
	ans, err := q.call(ctx, methodPurge, appendQueueRef(nil, q.info.Vhost, q.info.Name))
	if err != nil {
		return 0, err
	}
	return decodeCount(ans)
}

// Delete implements queue.Queue: the owner's vhost deletes the queue
// (a metadata write) after checking the conditions.
func (q *Queue) Delete(ctx context.Context, ifUnused, ifEmpty bool) (int, error) {
	var flags byte
	if ifUnused {
		flags |= 1
	}
	if ifEmpty {
		flags |= 2
	}
	ans, err := q.call(ctx, methodDelete, append(appendQueueRef(nil, q.info.Vhost, q.info.Name), flags))
	if err != nil {
		return 0, err
	}
	return decodeCount(ans)
}

func decodeCount(b []byte) (int, error) {
	d := decoder{b: b}
	n := d.u32of64()
	return int(n), d.err
}

// StatsContext asks the owner for the queue's counters.
func (q *Queue) StatsContext(ctx context.Context) (queue.Stats, error) {
	ans, err := q.call(ctx, methodStats, appendQueueRef(nil, q.info.Vhost, q.info.Name))
	if err != nil {
		return queue.Stats{}, err
	}
	st, err := decodeStats(ans)
	if err != nil {
		return queue.Stats{}, fmt.Errorf("forward: stats from node %s: %w", q.node, err)
	}
	return st, nil
}

// statsTimeout bounds Stats, which has no context.
const statsTimeout = 2 * time.Second

// Stats implements queue.Queue: the owner's counters, zero when it does
// not answer within statsTimeout.
func (q *Queue) Stats() queue.Stats {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	st, _ := q.StatsContext(ctx)
	return st
}

// Close implements queue.Queue: a proxy holds nothing.
func (q *Queue) Close(context.Context) error { return nil }

// call makes one call to the owner. An owner that cannot be reached is
// NOT_FOUND with RabbitMQ's text; other errors map through Config.Errors.
func (q *Queue) call(ctx context.Context, method string, req []byte) ([]byte, error) {
	q.waitSettled(ctx)
	ans, err := q.c.cfg.Network.Call(ctx, q.node, method, req)
	if err == nil {
		return ans, nil
	}
	if unreachable(err) && ctx.Err() == nil {
		err = status.Error(codes.NotFound, HomeDownText(q.info, q.node))
	}
	return nil, q.c.cfg.Errors(err)
}

// HomeDownText is RabbitMQ's text for a queue whose node is down.
func HomeDownText(info queue.Info, node string) string {
	kind := "queue"
	if info.Durable {
		kind = "durable queue"
	}
	return fmt.Sprintf("home node '%s' of %s '%s' in vhost '%s' is down or inaccessible", node, kind, info.Name, info.Vhost)
}

func unreachable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unimplemented:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// item is one publish waiting for its node's next call.
type item struct {
	q *Queue
	p queue.Publish
}

// sender is the publish path to one node: a queue of items, sent in calls
// that each take everything queued (up to MaxBatchBytes), up to
// MaxInFlight calls under way, their answers handled where the transport
// reads them (no goroutine waits for a call). One goroutine at a time
// sends (the pump):
// the calls leave in the order their items were queued, and the owner
// starts them in that order (transport's Send and HandleOrdered), so the
// messages of a channel reach their queue in the order published.
type sender struct {
	c    *Client
	node string

	mu          sync.Mutex
	pending     []item
	pendingSize int
	outstanding int           // bytes queued or in a call
	inflight    int           // calls sent and not answered
	pumping     bool          // a goroutine is sending
	closed      bool          // the Client closed: nothing more is sent
	space       chan struct{} // closed when outstanding drops below HighWater
	spare       [][]byte      // request buffers of answered calls, for the next ones
	spareItems  [][]item      // item slices of answered calls, for pending
}

func (s *sender) add(q *Queue, batch []queue.Publish) {
	if len(batch) == 0 {
		return
	}
	n := 0
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		items := make([]item, len(batch))
		for i, p := range batch {
			items[i] = item{q: q, p: p}
		}
		confirmAll(items, nil, false, nil)
		return
	}
	if s.pending == nil {
		if k := len(s.spareItems); k > 0 {
			s.pending, s.spareItems = s.spareItems[k-1], s.spareItems[:k-1]
		}
	}
	for _, p := range batch {
		s.pending = append(s.pending, item{q: q, p: p})
		n += p.Msg.EncodedSize() + 4
	}
	s.pendingSize += n
	s.outstanding += n
	s.maybePumpLocked()
	s.mu.Unlock()
}

// maybePumpLocked starts the pump if something waits and a call may go.
func (s *sender) maybePumpLocked() {
	if s.pumping || s.closed || len(s.pending) == 0 || s.inflight >= s.c.cfg.MaxInFlight {
		return
	}
	s.pumping = true
	if !s.c.goroutine(s.pump) {
		s.pumping = false
	}
}

func (s *sender) throttle(ctx context.Context) error {
	s.mu.Lock()
	if s.outstanding <= s.c.cfg.HighWater || s.closed {
		s.mu.Unlock()
		return nil
	}
	if s.space == nil {
		s.space = make(chan struct{})
	}
	ch := s.space
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pump sends batches, one call after another, while items wait and fewer
// than MaxInFlight calls are under way; each call's answer is handled
// where the transport reads it.
func (s *sender) pump() {
	for {
		s.mu.Lock()
		if s.closed || len(s.pending) == 0 || s.inflight >= s.c.cfg.MaxInFlight {
			s.pumping = false
			s.mu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(s.pending) && (n == 0 || size+s.pending[n].p.Msg.EncodedSize()+4 <= s.c.cfg.MaxBatchBytes) {
			size += s.pending[n].p.Msg.EncodedSize() + 4
			n++
		}
		var items []item
		if n == len(s.pending) {
			items, s.pending = s.pending, nil // its capacity serves again (spareItems)
		} else {
			items, s.pending = s.pending[:n:n], s.pending[n:]
		}
		s.pendingSize -= size
		s.inflight++
		var buf []byte
		if k := len(s.spare); k > 0 {
			buf, s.spare = s.spare[k-1][:0], s.spare[:k-1]
		}
		s.mu.Unlock()

		req := appendPublishes(buf, items)
		if !s.c.track() {
			s.answered(items, size, nil, nil, errClosed)
			continue
		}
		// The answer comes on the transport's reader: confirmers do not
		// block (a queue's own loop calls them too).
		err := s.c.cfg.Network.Send(transport.Within(s.c.ctx, s.c.cfg.CallTimeout), s.node, methodPublish, req, func(ans []byte, err error) {
			s.answered(items, size, req, ans, err)
			s.c.wg.Done()
		})
		if err != nil {
			s.answered(items, size, nil, nil, err)
			s.c.wg.Done()
		}
	}
}

// answered confirms or nacks the items of a call by its answer and frees
// its place. The request buffer of a call the owner answered is used again
// (it was sent in full; the owner decoded its own copy): at most
// MaxInFlight of them are kept, none of a failed call (it may still be
// queued for sending) or of a call to this node itself (its messages are
// the request's bytes).
func (s *sender) answered(items []item, size int, req, ans []byte, err error) {
	if err == nil && len(ans) != len(items) {
		err = fmt.Errorf("%w: %d verdicts for %d messages", errMalformed, len(ans), len(items))
	}
	if err != nil {
		s.c.log.Warn("forward: publishing to a queue's node failed; the messages are nacked", "node", s.node, "messages", len(items), "err", err)
	}
	// A successful answer from another node is handed over on a Network
	// reader, which flushes the deferred confirms before it waits for
	// more (a call to this node itself is answered elsewhere: its
	// confirms are not deferred).
	remote := s.node != s.c.cfg.Network.Node()
	var later *deferredConfirms
	if err == nil && s.c.deferring && remote {
		later = &s.c.deferred
	}
	confirmAll(items, ans, err == nil, later)
	clear(items) // the messages and confirmers are the publishers' now
	s.mu.Lock()
	if len(s.spareItems) <= s.c.cfg.MaxInFlight && cap(items) <= maxSpareItems { // one a call, and pending's
		s.spareItems = append(s.spareItems, items[:0])
	}
	if err == nil && req != nil && len(s.spare) < s.c.cfg.MaxInFlight && cap(req) <= 2*s.c.cfg.MaxBatchBytes && remote {
		s.spare = append(s.spare, req)
	}
	s.inflight--
	s.outstanding -= size
	if s.space != nil && s.outstanding <= s.c.cfg.HighWater {
		close(s.space)
		s.space = nil
	}
	s.maybePumpLocked()
	s.mu.Unlock()
}

// maxSpareItems bounds the item slices a sender keeps for its next calls
// (a burst's pending may have grown far bigger than a call).
const maxSpareItems = 4096

// close nacks what is queued and stops sending; the calls under way end
// with the Client's context.
func (s *sender) close() {
	s.mu.Lock()
	s.closed = true
	items := s.pending
	s.pending, s.pendingSize = nil, 0
	for _, it := range items {
		s.outstanding -= it.p.Msg.EncodedSize() + 4
	}
	if s.space != nil {
		close(s.space)
		s.space = nil
	}
	s.mu.Unlock()
	confirmAll(items, nil, false, nil)
}

// confirmAll tells each item's confirmer its verdict (ans[i] == verdictOK,
// or every one nacked when !ok), a run of items with one confirmer and
// verdict in one call. With later, a confirmer that can wait
// (queue.DeferredConfirmer) confirms without writing and joins later,
// whose flush writes it.
func confirmAll(items []item, ans []byte, ok bool, later *deferredConfirms) {
	// Every run's tags in one buffer, one after another (a confirmer
	// does not keep them: queue.Confirmer), made at the first confirm.
	var tags []uint64
	var cur queue.Confirmer
	curOK := false
	flush := func() {
		if cur != nil && len(tags) > 0 {
			run := tags[:len(tags):len(tags)]
			if dc, can := cur.(queue.DeferredConfirmer); can && later != nil {
				dc.ConfirmDeferred(run, curOK)
				later.add(dc)
			} else {
				cur.Confirm(run, curOK)
			}
		}
		tags = tags[len(tags):]
	}
	for i, it := range items {
		if it.p.Confirm == nil {
			continue
		}
		v := ok && ans[i] == verdictOK
		if it.p.Confirm != cur || v != curOK {
			flush()
			cur, curOK = it.p.Confirm, v
		}
		if tags == nil {
			tags = make([]uint64, 0, len(items)-i)
		}
		tags = append(tags, it.p.Tag)
	}
	flush()
}

// The verdicts of a publish answer, one byte a message in request order.
const (
	verdictPending byte = iota
	verdictOK
	verdictNack
)

var _ queue.Queue = (*Queue)(nil)
