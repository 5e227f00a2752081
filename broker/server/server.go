package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/auth"
	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/counters"
	"github.com/warrenmq/warren/broker/forward"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/mgmt"
	"github.com/warrenmq/warren/broker/store"
	"github.com/warrenmq/warren/broker/stream"
	"github.com/warrenmq/warren/broker/vhost"
)

// Version is the broker's version string.
const Version = "0.1.0"

// ErrAuth is wrapped by every error Authenticate returns.
var ErrAuth = auth.ErrRefused

// Broker is one node.
type Broker struct {
	cfg  config.Config
	log  *slog.Logger
	meta *meta.Raft
	// cluster is the node's part of its cluster (a one-node cluster too).
	cluster *clusterNode
	// forward makes the proxies of queues other nodes hold.
	forward *forward.Client
	auth    *auth.Checker
	// lock holds the data directory's flock from New to Shutdown.
	lock *os.File

	msgID atomic.Uint64
	// clusterID is the permanent id the node made on its first start.
	clusterID string

	mu     sync.RWMutex
	vhosts map[string]*vhost.Vhost

	AMQP   *amqp.Server
	Stream *stream.Server
	// churn is the node's connection, channel and queue churn, counted by
	// the protocol servers and the vhosts.
	churn counters.Churn

	lnMu      sync.Mutex
	listeners map[string]net.Listener
	cancel    context.CancelFunc
	serveCtx  context.Context // Start's, for listeners reopened after a join
	tlsCfg    *tls.Config     // the TLS listeners', for the same
	serveWG   sync.WaitGroup
	unsub     func()

	// Background work started by metadata events (a deleted vhost's close
	// and file removal, policy changes): Shutdown waits for it, so a node
	// never exits with a vhost half removed. bgMu orders Add against Wait.
	bgMu       sync.Mutex
	bgStopping bool
	bg         sync.WaitGroup

	ready       atomic.Bool
	memoryLimit int64
	startedAt   time.Time
	alarmMu     sync.Mutex
	memAlarm    bool
	diskAlarm   bool
	// disk watches free space for the disk alarm; its writers raise the
	// alarm between the resource watch's samples.
	disk *store.DiskWatch
	// blockMu orders alarm changes told to the protocol servers; under it,
	// blockedMem and blockedDisk are what they were last told.
	blockMu                 sync.Mutex
	blockedMem, blockedDisk bool
	resources               mgmt.NodeResources // the last sample watchResources took; under alarmMu
}

// New opens the node's storage and recovers every vhost. It does not listen.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("server: create data dir: %w", err)
	}
	lock, err := lockDataDir(cfg.DataDir, cfg.Cluster.NodeName)
	if err != nil {
		return nil, err
	}
	cn, err := openCluster(ctx, cfg, log)
	if err != nil {
		lock.Close()
		return nil, err
	}
	m := cn.meta
	// A node alone is the whole cluster: its restart is the cluster's, so
	// the transient exchanges go too.
	if err := vhost.DropTransient(ctx, m, cfg.Cluster.NodeName, len(m.Nodes()) <= 1); err != nil {
		_ = cn.close()
		lock.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := store.MigrateLayout(ctx, cfg.DataDir, durableQueues(m), log); err != nil {
		_ = cn.close()
		lock.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	id, err := clusterID(cfg.DataDir)
	if err != nil {
		_ = cn.close()
		lock.Close()
		return nil, err
	}
	b := &Broker{cfg: cfg, log: log, meta: m, cluster: cn, lock: lock, vhosts: map[string]*vhost.Vhost{}, listeners: map[string]net.Listener{}, clusterID: id}
	b.forward = forward.NewClient(forward.Config{Network: cn.net, Errors: vhost.FromStatus, Log: log})
	forward.Serve(cn.net, forwardLocal{b}, vhost.ToStatus, log)
	b.auth = auth.NewChecker(m, cfg.Auth.LoopbackUsers)
	b.startedAt = time.Now()
	b.disk = store.NewDiskWatch(cfg.DataDir, cfg.Limits.DiskFreeLimit, b.diskAlarmChanged)
	b.disk.Sample()
	b.msgID.Store(uint64(b.startedAt.UnixNano()))
	b.memoryLimit = cfg.Limits.MemoryHighWatermark
	if b.memoryLimit == 0 {
		b.memoryLimit = systemMemory() * 4 / 10
	}
	if err := b.bootstrap(ctx); err != nil {
		b.forward.Close()
		_ = cn.close()
		lock.Close()
		return nil, err
	}
	for _, v := range m.Vhosts() {
		if err := b.startVhost(ctx, v); err != nil {
			_ = b.closeVhosts(ctx)
			b.forward.Close()
			_ = cn.close()
			lock.Close()
			return nil, err
		}
	}
	b.unsub = m.Subscribe(b.onMetaEvent)
	b.blockMu.Lock()
	b.AMQP = amqp.NewServer(amqp.Config{
		FrameMax:          cfg.AMQP.FrameMax,
		ChannelMax:        cfg.AMQP.ChannelMax,
		Heartbeat:         cfg.AMQP.Heartbeat,
		HandshakeTimeout:  cfg.AMQP.HandshakeTimeout,
		BusyPoll:          cfg.AMQP.BusyPoll,
		OutputBufferLimit: int(cfg.AMQP.OutputBufferLimit),
		MaxMessageSize:    cfg.Limits.MaxMessageSize,
		Product:           "Warren",
		Version:           Version,
		Churn:             &b.churn,
	}, b, log.With("subsystem", "amqp"))
	b.Stream = stream.NewServer(stream.Config{
		FrameMax:          cfg.Stream.FrameMax,
		InitialFrameMax:   cfg.Stream.InitialFrameMax,
		Heartbeat:         cfg.Stream.Heartbeat,
		AdvertisedHost:    cfg.Stream.AdvertisedHost,
		AdvertisedPort:    cfg.Stream.AdvertisedPort,
		AdvertisedTLSPort: cfg.Stream.AdvertisedTLSPort,
		HandshakeTimeout:  cfg.AMQP.HandshakeTimeout,
		Product:           "Warren",
		WarrenVersion:     Version,
		Churn:             &b.churn,
		Nodes:             b,
	}, b, log.With("subsystem", "stream"))
	b.blockedMem, b.blockedDisk = false, false // the new servers were told nothing yet
	b.blockMu.Unlock()
	b.applyAlarms()
	go b.watchLeaderless(cn.stopSweep)
	return b, nil
}

// bootstrap creates the default vhost and user on first start.
func (b *Broker) bootstrap(ctx context.Context) error {
	if len(b.meta.Vhosts()) > 0 || len(b.meta.Users()) > 0 {
		return nil
	}
	a := b.cfg.Auth
	if err := b.meta.PutVhost(ctx, meta.Vhost{Name: a.DefaultVhost, Description: "Default virtual host"}); err != nil {
		return fmt.Errorf("server: create default vhost: %w", err)
	}
	if a.DefaultUser == "" {
		return nil
	}
	hash, err := meta.HashPassword(a.DefaultPass)
	if err != nil {
		return fmt.Errorf("server: hash default password: %w", err)
	}
	if err := b.meta.PutUser(ctx, meta.User{Name: a.DefaultUser, PasswordHash: hash, HashingAlgorithm: "rabbit_password_hashing_sha256", Tags: []string{"administrator"}}); err != nil {
		return fmt.Errorf("server: create default user: %w", err)
	}
	if err := b.meta.PutPermission(ctx, meta.Permission{User: a.DefaultUser, Vhost: a.DefaultVhost, Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
		return fmt.Errorf("server: grant default permissions: %w", err)
	}
	return nil
}

// durableQueues lists every vhost's durable queues and streams.
func durableQueues(m meta.Store) []store.VhostQueues {
	var out []store.VhostQueues
	for _, v := range m.Vhosts() {
		vq := store.VhostQueues{Vhost: v.Name}
		for _, q := range m.Queues(v.Name) {
			if q.Durable && !q.Exclusive {
				vq.Queues = append(vq.Queues, q.Name)
			}
		}
		out = append(out, vq)
	}
	return out
}

func (b *Broker) vhostDir(name string) string {
	return store.VhostDir(b.cfg.DataDir, name)
}

func (b *Broker) startVhost(ctx context.Context, mv meta.Vhost) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.vhosts[mv.Name]; ok {
		v.UpdateSettings(ctx, mv)
		return nil
	}
	v, err := vhost.Open(ctx, vhost.Config{
		Name:         mv.Name,
		Node:         b.cfg.Cluster.NodeName,
		Dir:          b.vhostDir(mv.Name),
		Meta:         b.meta,
		Defaults:     b.cfg.Storage,
		NewMessageID: b.NewMessageID,
		Disk:         b.disk,
		Log:          b.log,
		Churn:        &b.churn,
		Remote:       b.forward,
		NodeDown:     b.nodeDown,
	})
	if err != nil {
		return fmt.Errorf("server: start vhost %q: %w", mv.Name, err)
	}
	b.vhosts[mv.Name] = v
	return nil
}

func (b *Broker) stopVhost(ctx context.Context, name string, removeFiles bool) {
	b.mu.Lock()
	v, ok := b.vhosts[name]
	delete(b.vhosts, name)
	b.mu.Unlock()
	if !ok {
		return
	}
	if err := v.Close(ctx); err != nil {
		b.log.Warn("close vhost", "vhost", name, "err", err)
	}
	if removeFiles {
		if err := os.RemoveAll(b.vhostDir(name)); err != nil {
			b.log.Warn("remove vhost files", "vhost", name, "err", err)
		}
	}
}

// onMetaEvent applies the node-level metadata changes (vhosts, policies);
// each vhost follows its own exchanges, queues and bindings. It runs while
// the store applies the change, before the write returns: it must not
// write metadata.
func (b *Broker) onMetaEvent(e meta.Event) {
	ctx := context.Background()
	switch e.Kind {
	case meta.VhostPut:
		if mv, ok := b.meta.Vhost(e.Name); ok {
			if err := b.startVhost(ctx, mv); err != nil {
				b.log.Error("start vhost", "vhost", e.Name, "err", err)
			}
		}
	case meta.VhostDeleted:
		// Stopped before the delete returns, as every metadata change is
		// applied before its write returns (a vhost made again under the
		// same name starts afresh).
		b.Stream.CloseVhost(e.Name, "vhost deleted")
		b.stopVhost(ctx, e.Name, true)
	case meta.Reset:
		// The whole state was replaced: start the vhosts it has, stop
		// those it no longer has (each vhost resyncs its own contents).
		want := map[string]bool{}
		for _, mv := range b.meta.Vhosts() {
			want[mv.Name] = true
			if err := b.startVhost(ctx, mv); err != nil {
				b.log.Error("start vhost", "vhost", mv.Name, "err", err)
			}
		}
		for _, v := range b.VhostList() {
			if !want[v.Name()] {
				b.Stream.CloseVhost(v.Name(), "vhost deleted")
				b.stopVhost(ctx, v.Name(), true)
			}
		}
		for _, v := range b.VhostList() {
			b.background(func() { v.PoliciesChanged(ctx) })
		}
	case meta.PolicyPut, meta.PolicyDeleted:
		b.mu.RLock()
		v := b.vhosts[e.Vhost]
		b.mu.RUnlock()
		if v != nil {
			b.background(func() { v.PoliciesChanged(ctx) })
		}
	}
}

// background runs fn on its own goroutine unless the node is shutting
// down; Shutdown waits for it.
func (b *Broker) background(fn func()) {
	b.bgMu.Lock()
	defer b.bgMu.Unlock()
	if b.bgStopping {
		return
	}
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		fn()
	}()
}

// waitBackground stops background work from starting and waits for what
// runs.
func (b *Broker) waitBackground() {
	b.bgMu.Lock()
	b.bgStopping = true
	b.bgMu.Unlock()
	b.bg.Wait()
}

// NewMessageID implements amqp.Backend.
func (b *Broker) NewMessageID() uint64 { return b.msgID.Add(1) }

// Meta returns the metadata store.
func (b *Broker) Meta() meta.Store { return b.meta }

// Config returns the node's configuration.
func (b *Broker) Config() config.Config { return b.cfg }

// Vhost implements amqp.Backend.
func (b *Broker) Vhost(name string) (*vhost.Vhost, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	v, ok := b.vhosts[name]
	return v, ok
}

// VhostList returns the running vhosts.
func (b *Broker) VhostList() []*vhost.Vhost {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*vhost.Vhost, 0, len(b.vhosts))
	for _, v := range b.vhosts {
		out = append(out, v)
	}
	return out
}

// Permission implements amqp.Backend.
func (b *Broker) Permission(user, vhost string) (meta.Permission, bool) {
	return b.meta.Permission(vhost, user)
}

// UserTags implements amqp.Backend.
func (b *Broker) UserTags(user string) []string {
	u, _ := b.meta.User(user)
	return u.Tags
}

// Authenticate implements amqp.Backend and stream.Backend: the login
// rules every listener shares (auth.Checker: password, loopback_users).
func (b *Broker) Authenticate(user, password string, remote net.Addr) error {
	_, err := b.auth.Login(user, password, remote)
	return err
}

// Login implements mgmt.Broker: the same rules as Authenticate, returning
// the user.
func (b *Broker) Login(user, password string, remote net.Addr) (meta.User, error) {
	return b.auth.Login(user, password, remote)
}

func (b *Broker) closeVhosts(ctx context.Context) error {
	b.mu.Lock()
	vs := b.vhosts
	b.vhosts = map[string]*vhost.Vhost{}
	b.mu.Unlock()
	var errs []error
	for _, v := range vs {
		if err := v.Close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
