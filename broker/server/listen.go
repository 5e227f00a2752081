package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/mgmt"
	"github.com/warrenmq/warren/broker/netaccept"
	"github.com/warrenmq/warren/broker/stream"
)

// Listener names for Addr.
const (
	ListenerAMQP       = "amqp"
	ListenerHTTP       = "http"
	ListenerPrometheus = "prometheus"
	ListenerStream     = "stream"
	// The TLS listeners have RabbitMQ's protocol names (management API
	// overview, listeners).
	ListenerAMQPTLS   = "amqp/ssl"
	ListenerStreamTLS = "stream/ssl"
	ListenerPprof     = "pprof"
)

// Start opens the listeners and serves until Shutdown.
func (b *Broker) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	b.cancel = cancel
	b.lnMu.Lock()
	b.serveCtx = ctx
	b.lnMu.Unlock()
	if b.cfg.AMQP.Listen != "" {
		ln, err := b.listen(ListenerAMQP, b.cfg.AMQP.Listen)
		if err != nil {
			cancel()
			return err
		}
		b.serve(func() error { return b.AMQP.Serve(ctx, ln) }, ListenerAMQP)
	}
	if b.cfg.Stream.Listen != "" {
		sln, err := b.listen(ListenerStream, b.cfg.Stream.Listen)
		if err != nil {
			cancel()
			b.closeListeners()
			return err
		}
		b.serve(func() error { return b.Stream.Serve(ctx, sln) }, ListenerStream)
	}
	if err := b.startTLS(ctx); err != nil {
		cancel()
		b.closeListeners()
		return err
	}
	for _, h := range b.httpServers(ctx) {
		if h.addr == "" {
			continue
		}
		hln, err := b.listen(h.name, h.addr)
		if err != nil {
			cancel()
			b.closeListeners()
			return err
		}
		b.serve(func() error { return mgmt.Serve(ctx, hln, h.handler, h.limits) }, h.name)
	}
	go b.watchResources(ctx)
	b.ready.Store(true)
	b.log.Info("warren started", "node", b.cfg.Cluster.NodeName, "amqp", b.Addr(ListenerAMQP), "stream", b.Addr(ListenerStream), "amqps", b.Addr(ListenerAMQPTLS), "stream_tls", b.Addr(ListenerStreamTLS), "http", b.Addr(ListenerHTTP), "prometheus", b.Addr(ListenerPrometheus), "data_dir", b.cfg.DataDir)
	return nil
}

// startTLS opens the TLS listeners that are configured: the same AMQP and
// stream servers behind crypto/tls. Addr reports the TCP address.
func (b *Broker) startTLS(ctx context.Context) error {
	if !b.cfg.TLSEnabled() {
		return nil
	}
	tcfg, err := b.cfg.TLS.ServerConfig(func(err error) {
		if err != nil {
			b.log.Error("TLS certificate files changed but do not load", "err", err)
			return
		}
		b.log.Info("TLS certificate files changed: reloaded for new connections", "cert_file", b.cfg.TLS.CertFile)
	})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	b.lnMu.Lock()
	b.tlsCfg = tcfg
	b.lnMu.Unlock()
	if addr := b.cfg.AMQP.TLSListen; addr != "" {
		ln, err := b.listen(ListenerAMQPTLS, addr)
		if err != nil {
			return err
		}
		b.serve(func() error { return b.AMQP.Serve(ctx, tls.NewListener(ln, tcfg)) }, ListenerAMQPTLS)
	}
	if addr := b.cfg.Stream.TLSListen; addr != "" {
		ln, err := b.listen(ListenerStreamTLS, addr)
		if err != nil {
			return err
		}
		b.serve(func() error { return b.Stream.ServeTLS(ctx, ln, tcfg) }, ListenerStreamTLS)
	}
	return nil
}

func (b *Broker) serve(fn func() error, name string) {
	b.serveWG.Add(1)
	go func() {
		defer b.serveWG.Done()
		if err := fn(); err != nil {
			b.log.Error("listener stopped", "listener", name, "err", err)
		}
	}()
}

func (b *Broker) listen(name, addr string) (net.Listener, error) {
	mss := 0 // the HTTP listeners keep the route's
	switch name {
	case ListenerAMQP, ListenerAMQPTLS:
		mss = amqp.ListenMSS
	case ListenerStream, ListenerStreamTLS:
		mss = stream.ListenMSS
	}
	ln, err := netaccept.Listen(context.Background(), addr, mss)
	if err != nil {
		return nil, fmt.Errorf("server: listen %s on %s: %w", name, addr, err)
	}
	b.lnMu.Lock()
	b.listeners[name] = ln
	b.lnMu.Unlock()
	return ln, nil
}

func (b *Broker) closeListeners() {
	b.lnMu.Lock()
	defer b.lnMu.Unlock()
	for _, ln := range b.listeners {
		_ = ln.Close()
	}
}

// closeClientListeners closes the AMQP and stream listeners (plain and
// TLS): a drained node takes no new clients but still serves its HTTP API
// and metrics.
func (b *Broker) closeClientListeners() {
	b.lnMu.Lock()
	defer b.lnMu.Unlock()
	for _, name := range []string{ListenerAMQP, ListenerAMQPTLS, ListenerStream, ListenerStreamTLS} {
		if ln, ok := b.listeners[name]; ok {
			_ = ln.Close()
		}
	}
}

// pauseClientListeners closes the AMQP and stream listeners (plain and
// TLS), as drain does, and returns what opens them again on the addresses
// they had (a join: clients see connection refused and retry, not an
// empty user table). Reopening does nothing once the node is stopping or
// draining.
func (b *Broker) pauseClientListeners() (resume func()) {
	b.lnMu.Lock()
	addrs := map[string]string{}
	for _, name := range []string{ListenerAMQP, ListenerAMQPTLS, ListenerStream, ListenerStreamTLS} {
		if ln, ok := b.listeners[name]; ok {
			addrs[name] = ln.Addr().String()
			_ = ln.Close()
		}
	}
	ctx, tcfg := b.serveCtx, b.tlsCfg
	b.lnMu.Unlock()
	return func() {
		if ctx == nil || ctx.Err() != nil || b.cluster.draining.Load() {
			return
		}
		for name, addr := range addrs {
			ln, err := b.listen(name, addr)
			if err != nil {
				b.log.Error("cluster: reopen a client listener after a join", "listener", name, "error", err)
				continue
			}
			switch name {
			case ListenerAMQP:
				b.serve(func() error { return b.AMQP.Serve(ctx, ln) }, name)
			case ListenerAMQPTLS:
				b.serve(func() error { return b.AMQP.Serve(ctx, tls.NewListener(ln, tcfg)) }, name)
			case ListenerStream:
				b.serve(func() error { return b.Stream.Serve(ctx, ln) }, name)
			case ListenerStreamTLS:
				b.serve(func() error { return b.Stream.ServeTLS(ctx, ln, tcfg) }, name)
			}
		}
	}
}

// Addr returns a listener's address (useful with port 0), nil if not listening.
func (b *Broker) Addr(name string) net.Addr {
	b.lnMu.Lock()
	defer b.lnMu.Unlock()
	if ln, ok := b.listeners[name]; ok {
		return ln.Addr()
	}
	return nil
}

// Shutdown stops accepting, closes client connections, then flushes and
// closes every vhost and the metadata store.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.ready.Store(false)
	// Drain first: leaderships move to other members while this node can
	// still hand them over, so a rolling restart never stalls a group.
	if err := b.moveLeadership(ctx); err != nil {
		b.log.Warn("cluster: could not move leaderships before stopping; the other members elect new leaders", "error", err)
	}
	if b.cancel != nil {
		b.cancel()
	}
	b.closeListeners()
	var errs []error
	if err := b.AMQP.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := b.Stream.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	b.serveWG.Wait()
	if b.unsub != nil {
		b.unsub()
	}
	b.waitBackground()
	// No client is left to publish: the calls still under way to other
	// nodes end (their messages nacked) and their goroutines with them.
	b.forward.Close()
	if err := b.closeVhosts(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := b.cluster.close(); err != nil {
		errs = append(errs, err)
	}
	if b.lock != nil {
		_ = b.lock.Close()
		b.lock = nil
	}
	return errors.Join(errs...)
}

type httpServer struct {
	name, addr string
	handler    http.Handler
	limits     mgmt.ListenerLimits
}
