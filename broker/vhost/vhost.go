package vhost

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/counters"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
	"github.com/warrenmq/warren/broker/routing"
	"github.com/warrenmq/warren/broker/store"
	"github.com/warrenmq/warren/broker/store/streamlog"
)

// Config is what a vhost runtime needs.
type Config struct {
	Name string
	// Node is this node's name (cluster.node_name): the queues the
	// metadata places on it are opened here, the others only routed to.
	Node string
	// QueueTypes opens queues by x-queue-type; nil is DefaultQueueTypes.
	QueueTypes QueueTypes
	// Dir is this vhost's storage directory.
	Dir  string
	Meta meta.Store
	// Defaults are the node-wide storage defaults the vhost settings override.
	Defaults config.Storage
	// NewMessageID returns node-unique message ids.
	NewMessageID func() uint64
	// Disk (may be nil) is told what the vhost's storage writes, for the
	// disk alarm.
	Disk *store.DiskWatch
	Log  *slog.Logger
	// Churn (may be nil) counts queues declared, created and deleted.
	Churn *counters.Churn
	// Remote (may be nil: no forwarding, a queue of another node is an
	// ErrRemote where it would be used) makes the proxies of queues other
	// nodes hold (forward.Client).
	Remote RemoteQueues
	// NodeDown (may be nil: never) reports whether the cluster's transport
	// reports node down (no answer to its pings for seconds) and not up
	// since. queue.delete force-deletes the record of a queue of another
	// node only then, never because one call to it failed.
	NodeDown func(node string) bool
}

// RemoteQueues makes a proxy of a queue another node holds: a queue.Queue
// whose operations go to that node. Its errors from the owner are *Error
// (FromStatus); an owner it cannot reach is ErrNotFound with RabbitMQ's
// "home node ... is down or inaccessible".
type RemoteQueues interface {
	Queue(info queue.Info, node string) queue.Queue
}

// remoteStats is what a proxy has beyond queue.Queue: the owner's counters
// with a context and its error (declare answers from them).
type remoteStats interface {
	StatsContext(ctx context.Context) (queue.Stats, error)
}

// Settings are a vhost's effective storage settings.
type Settings struct {
	QueueVersion         int
	EmbedMessagesBelow   int
	StreamReadAhead      bool
	StreamReadAheadLimit int
	DefaultQueueType     string
}

// Vhost is one virtual host's runtime. Safe for concurrent use.
type Vhost struct {
	cfg      Config
	log      *slog.Logger
	routes   *routing.Table
	store    *store.VhostStore
	settings atomic.Pointer[Settings]
	// readAhead is the stream read-ahead setting every stream reader of
	// this vhost consults (kept equal to settings).
	readAhead *streamlog.ReadAhead

	// projMu serializes the projection: the event handler and recovery.
	projMu sync.Mutex
	unsub  func()

	mu     sync.RWMutex
	queues map[string]*queueEntry
	closed bool
	// opens counts the running openers (opener.go; Close waits for
	// them); openPool, under openMu (a leaf), queues the opens startOpen
	// hands them.
	opens    sync.WaitGroup
	openMu   sync.Mutex
	openPool openPool
	// convertMu serialises queue-version conversions: one queue at a time.
	convertMu sync.Mutex

	// Dead letters routed to queues of other nodes (deadletter.go).
	dlDropped    atomic.Uint64
	dlConfirmers sync.Map // queue name and node -> *dropConfirmer
}

// queueEntry is a queue the metadata lists: its record and, when this
// node holds it, the open queue. Its fields change under Vhost.mu. An
// entry with opening set is being opened (startOpen): its q and openErr
// are set once, under Vhost.mu, before opening is closed; read them under
// Vhost.mu or through wait.
type queueEntry struct {
	rec meta.Queue
	q   queue.Queue // nil: held by another node (remote), opening failed (openErr) or under way (opening)
	// opening is closed once the queue is open (or failed to); nil for an
	// entry complete when it was made.
	opening chan struct{}
	// remote: the record places the queue on another node; proxy, when
	// not nil, forwards to it (Config.Remote).
	remote  bool
	proxy   queue.Queue
	openErr error
	// The handler's result of deleting it, read by the DeleteQueue that
	// wrote the delete.
	deletedMsgs int
	deleteErr   error
}

// wait returns the entry's queue and open error, after the open under way
// when there is one (or ctx's error).
func (e *queueEntry) wait(ctx context.Context) (queue.Queue, error) {
	if e.opening != nil {
		select {
		case <-e.opening:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return e.q, e.openErr
}

// Open starts a vhost runtime and recovers its exchanges, queues and
// bindings from the meta store; from then on it follows the store's events.
func Open(ctx context.Context, cfg Config) (*Vhost, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Churn == nil {
		cfg.Churn = &counters.Churn{}
	}
	if cfg.QueueTypes == nil {
		cfg.QueueTypes = DefaultQueueTypes()
	}
	st, err := store.OpenVhost(ctx, store.VhostConfig{Dir: cfg.Dir, Disk: cfg.Disk, Log: cfg.Log.With("vhost", cfg.Name)})
	if err != nil {
		return nil, fmt.Errorf("vhost %q: open store: %w", cfg.Name, err)
	}
	v := &Vhost{
		cfg:    cfg,
		log:    cfg.Log.With("vhost", cfg.Name),
		routes: routing.NewTable(),
		store:  st,
		queues: map[string]*queueEntry{},
	}
	mv, _ := cfg.Meta.Vhost(cfg.Name)
	v.settings.Store(v.effective(mv))
	v.readAhead = streamlog.NewReadAhead(v.Settings().StreamReadAhead, v.Settings().StreamReadAheadLimit)
	// Subscribe before reading the state: an event that arrives while
	// recover runs waits on projMu and is applied after it (each handler
	// step is idempotent, so one recover already saw is harmless).
	v.unsub = cfg.Meta.Subscribe(v.onEvent)
	if err := v.recover(ctx); err != nil {
		_ = v.Close(ctx)
		return nil, err
	}
	return v, nil
}

// streamDisk is the disk watch for the vhost's streams (nil when none).
func (v *Vhost) streamDisk() streamlog.Disk {
	if v.cfg.Disk == nil {
		return nil
	}
	return v.cfg.Disk
}

// Name is the vhost's name.
func (v *Vhost) Name() string { return v.cfg.Name }

// Settings returns the effective storage settings.
func (v *Vhost) Settings() Settings { return *v.settings.Load() }

// StreamReadAhead is the vhost's stream read-ahead setting, shared by all
// its stream readers and updated with the vhost's settings.
func (v *Vhost) StreamReadAhead() *streamlog.ReadAhead { return v.readAhead }

// Routes exposes the routing table (read-only use: listing).
func (v *Vhost) Routes() *routing.Table { return v.routes }

// Store exposes the vhost's storage (for stats).
func (v *Vhost) Store() *store.VhostStore { return v.store }

func (v *Vhost) effective(mv meta.Vhost) *Settings {
	d := v.cfg.Defaults
	s := &Settings{
		QueueVersion:         d.QueueVersion,
		EmbedMessagesBelow:   d.EmbedMessagesBelow,
		StreamReadAhead:      d.StreamReadAhead,
		StreamReadAheadLimit: d.StreamReadAheadLimit,
		DefaultQueueType:     "classic",
	}
	if mv.Storage.QueueVersion != 0 {
		s.QueueVersion = mv.Storage.QueueVersion
	}
	if mv.Storage.EmbedMessagesBelow != 0 {
		s.EmbedMessagesBelow = mv.Storage.EmbedMessagesBelow
	}
	if mv.Storage.StreamReadAhead != nil {
		s.StreamReadAhead = *mv.Storage.StreamReadAhead
	}
	if mv.Storage.StreamReadAheadLimit != 0 {
		s.StreamReadAheadLimit = mv.Storage.StreamReadAheadLimit
	}
	if mv.DefaultQueueType != "" {
		s.DefaultQueueType = mv.DefaultQueueType
	}
	return s
}

func exchangeFromMeta(e meta.Exchange, kind routing.Kind) routing.Exchange {
	ae, _ := e.Arguments["alternate-exchange"].(string)
	return routing.Exchange{Name: e.Name, Kind: kind, Durable: e.Durable, AutoDelete: e.AutoDelete, Internal: e.Internal, Args: e.Arguments, AlternateExchange: ae}
}

func bindingFromMeta(b meta.Binding) routing.Binding {
	return routing.Binding{Source: b.Source, Destination: b.Destination, ToExchange: b.DestinationType == "exchange", Key: b.RoutingKey, Args: b.Arguments}
}

func bindingToMeta(vhost string, b routing.Binding) meta.Binding {
	dt := "queue"
	if b.ToExchange {
		dt = "exchange"
	}
	return meta.Binding{Vhost: vhost, Source: b.Source, Destination: b.Destination, DestinationType: dt, RoutingKey: b.Key, Arguments: b.Args}
}

func (v *Vhost) storeOptions(args queue.Args) store.Options {
	s := v.Settings()
	ver := s.QueueVersion
	if args.QueueVersion != 0 {
		ver = args.QueueVersion
	}
	return store.Options{Version: ver, EmbedBelow: s.EmbedMessagesBelow}
}

// streamDir is the directory of a stream's log.
func (v *Vhost) streamDir(name string) string { return store.StreamDir(v.cfg.Dir, name) }

// policyQueueVersion is the queue-version of the policy matching the queue, 0 when none.
func (v *Vhost) policyQueueVersion(name string) int {
	p, ok := meta.MatchPolicy(v.cfg.Meta.Policies(v.cfg.Name), name, "queue")
	if !ok {
		return 0
	}
	switch n := p.Definition["queue-version"].(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	}
	return 0
}

// NewServerName returns a server-generated queue name (amq.gen-...).
func NewServerName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "amq.gen-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// Close stops every queue (clean shutdown) and closes the store.
func (v *Vhost) Close(ctx context.Context) error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	qs := make([]queue.Queue, 0, len(v.queues))
	for _, e := range v.queues {
		if e.q != nil {
			qs = append(qs, e.q)
		}
	}
	v.mu.Unlock()
	if v.unsub != nil {
		v.unsub()
	}
	// Queues still opening close themselves (they see closed); those
	// queued and not started are not opened.
	v.opens.Wait()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.Close(ctx); err != nil && !errors.Is(err, queue.ErrStopped) {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := v.store.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// host implements queue.Host for the vhost's queues.
type host struct{ v *Vhost }

func (h host) NewMessageID() uint64 { return h.v.cfg.NewMessageID() }

func (h host) DeadLetter(exchange string, msgs []*message.Message) {
	var dst []queue.Queue
	for _, m := range msgs {
		var err error
		// A queue of another node gets it through its proxy. (A target
		// still opening is waited for without a deadline: its open ends,
		// in failure at the latest when the vhost closes.)
		dst, err = h.v.Route(context.Background(), exchange, m.RoutingKey, nil, dst[:0])
		if err != nil && errors.Is(err, ErrRemote) {
			// The local queues still get it; this node does not forward.
			h.v.log.Warn("dead-letter: a queue it routes to is on another node", "exchange", exchange, "err", err)
		}
		for _, q := range dst {
			// A queue of another node may not take it (its node down):
			// counted and logged once per queue (deadletter.go).
			q.Publish([]queue.Publish{{Msg: m, Confirm: h.v.remoteDropConfirmer(q)}})
		}
	}
}

func (h host) Expired(q queue.Queue) {
	// The delete is a metadata write: never on the queue's goroutine.
	go func() {
		_, err := h.v.DeleteQueue(context.Background(), q.Info().Name, QueueDeleteOptions{Force: true})
		if err != nil && !errors.Is(err, ErrNotFound) {
			h.v.log.Warn("auto-delete queue", "queue", q.Info().Name, "err", err)
		}
	}()
}

func reservedName(name string) bool { return strings.HasPrefix(name, "amq.") }

// UpdateSettings applies a changed vhost record: new storage settings take
// effect at once; a changed queue version converts each classic queue's
// files, one queue at a time, in the background.
func (v *Vhost) UpdateSettings(ctx context.Context, mv meta.Vhost) {
	old := v.settings.Load()
	next := v.effective(mv)
	v.settings.Store(next)
	v.readAhead.Set(next.StreamReadAhead, next.StreamReadAheadLimit)
	if old.QueueVersion != next.QueueVersion || old.EmbedMessagesBelow != next.EmbedMessagesBelow {
		go v.convertQueues(context.WithoutCancel(ctx))
	}
}

// PoliciesChanged re-applies policies that affect storage (queue-version).
func (v *Vhost) PoliciesChanged(ctx context.Context) {
	v.convertQueues(ctx)
}

// convertQueues brings every classic queue to its effective storage options.
func (v *Vhost) convertQueues(ctx context.Context) {
	v.convertMu.Lock()
	defer v.convertMu.Unlock()
	for _, q := range v.Queues() {
		c, ok := q.(*queue.Classic)
		if !ok {
			continue
		}
		args, err := queue.ParseArgs(q.Info().Args)
		if err != nil {
			continue
		}
		opts := v.storeOptions(args)
		if args.QueueVersion == 0 {
			if ver := v.policyQueueVersion(q.Info().Name); ver != 0 {
				opts.Version = ver
			}
		}
		if err := c.SetStorage(ctx, opts); err != nil {
			v.log.Warn("convert queue storage", "queue", q.Info().Name, "err", err)
		}
	}
}
