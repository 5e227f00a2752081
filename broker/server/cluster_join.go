package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Join implements mgmt.Cluster (warren ctl join): this node, alone in a
// cluster of its own, joins the cluster of the node whose cluster listener
// is at addr, without a restart. RabbitMQ's join_cluster discards the
// joining node's data (it resets it); Warren refuses instead while the
// node holds anything besides its defaults (the default vhost, user and
// permission): queues, streams, exchanges, bindings, policies, other
// vhosts, users or permissions. Its client connections are closed (they
// reconnect and find the cluster's definitions), its metadata is wiped,
// and it receives the cluster's. The membership is in the metadata group's
// state and peers.json, so it survives restarts (no seeds needed).
func (b *Broker) Join(ctx context.Context, addr string) error {
	if addr == "" {
		return status.Error(codes.InvalidArgument, "join needs the cluster address (host:port) of a node of the cluster to join")
	}
	if own := b.ownDefinitions(); len(own) > 0 {
		if len(own) > 10 {
			own = append(own[:10], fmt.Sprintf("and %d more", len(own)-10))
		}
		return status.Errorf(codes.FailedPrecondition, "this node has definitions of its own that joining would discard: %s; delete them (or export them and import them into the cluster afterwards) and join again", strings.Join(own, ", "))
	}
	c := b.cluster
	// From the reset until the cluster's state arrived (or the defaults
	// are back), the node takes no clients: they would find an empty
	// user table (403) and many give up; a refused connection they retry.
	resume := func() {}
	defer func() { resume() }()
	peer, err := c.members.Join(ctx, addr, func(ctx context.Context) error {
		r := b.pauseClientListeners()
		resume = func() {
			b.AMQP.Resume()
			b.Stream.Resume()
			r()
			if !b.cluster.draining.Load() {
				b.ready.Store(true)
			}
		}
		b.ready.Store(false)
		return b.resetForJoin(ctx)
	})
	if err != nil {
		// A node whose metadata group did not start again after the reset
		// has no users until it restarts: its clients would be refused
		// their credentials (403), so its listeners stay closed (they
		// retry elsewhere) and its health checks fail (Fault).
		if b.Fault() != nil {
			resume = func() {}
			b.log.Error("cluster: the join failed and left this node without metadata until it restarts; its client listeners stay closed", "error", err)
			return err
		}
		// A reset node that formed a cluster of its own again gets its
		// defaults back (nothing happens when it has definitions); one
		// whose join's outcome is unknown waits for the cluster's state
		// with its listeners closed.
		if c.members.Awaiting(context.WithoutCancel(ctx)) {
			go b.resumeWhenJoined(resume)
			resume = func() {}
			return err
		}
		if berr := b.bootstrap(context.WithoutCancel(ctx)); berr != nil {
			b.log.Error("cluster: recreate the defaults after a failed join", "error", berr)
		}
		return err
	}
	if err := c.meta.Sync(ctx); err != nil {
		return status.Errorf(codes.Unavailable, "joined the cluster of %s, but the metadata has not caught up yet: %v", peer, err)
	}
	b.log.Info("cluster: this node joined another cluster", "node", c.self.Name, "via", peer, "metadata_leader", c.meta.Group().Leader())
	return nil
}

// resumeWhenJoined runs resume once a node whose join's outcome was
// unknown holds the cluster's configuration (its join marker goes then)
// and caught up with its metadata (or the node stops).
func (b *Broker) resumeWhenJoined(resume func()) {
	c := b.cluster
	b.lnMu.Lock()
	ctx := b.serveCtx
	b.lnMu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	for !c.members.Settle(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	if err := c.meta.Sync(ctx); err != nil {
		b.log.Warn("cluster: joined, but the metadata has not caught up yet; taking clients anyway", "error", err)
	}
	b.log.Info("cluster: the cluster this node was joining reached it", "node", c.self.Name, "metadata_leader", c.meta.Group().Leader())
	resume()
}

// ownDefinitions lists what this node's metadata holds besides the
// defaults a first start creates.
func (b *Broker) ownDefinitions() []string {
	a := b.cfg.Auth
	var out []string
	for _, v := range b.meta.Vhosts() {
		if v.Name != a.DefaultVhost {
			out = append(out, fmt.Sprintf("vhost '%s'", v.Name))
		}
		for _, q := range b.meta.Queues(v.Name) {
			out = append(out, fmt.Sprintf("queue '%s' in vhost '%s'", q.Name, v.Name))
		}
		for _, x := range b.meta.Exchanges(v.Name) {
			if x.Name != "" && !strings.HasPrefix(x.Name, "amq.") {
				out = append(out, fmt.Sprintf("exchange '%s' in vhost '%s'", x.Name, v.Name))
			}
		}
		if n := len(b.meta.Bindings(v.Name)); n > 0 {
			out = append(out, fmt.Sprintf("%d bindings in vhost '%s'", n, v.Name))
		}
		for _, p := range b.meta.Policies(v.Name) {
			out = append(out, fmt.Sprintf("policy '%s' in vhost '%s'", p.Name, v.Name))
		}
	}
	for _, u := range b.meta.Users() {
		if u.Name != a.DefaultUser {
			out = append(out, fmt.Sprintf("user '%s'", u.Name))
		}
	}
	for _, p := range b.meta.Permissions() {
		if p.User != a.DefaultUser || p.Vhost != a.DefaultVhost {
			out = append(out, fmt.Sprintf("permission of '%s' in vhost '%s'", p.User, p.Vhost))
		}
	}
	return out
}

// resetForJoin closes the node's client connections and wipes its
// metadata (membership.Join calls it once the cluster said it would admit
// this node).
func (b *Broker) resetForJoin(ctx context.Context) error {
	const reason = "this node is joining another cluster"
	// Every connection goes, those still in their handshake too (one
	// authenticating after the wipe would be refused its credentials), and
	// none is taken until the join ends (Join resumes the servers).
	if err := b.AMQP.Suspend(ctx, reason); err != nil {
		return err
	}
	if err := b.Stream.Suspend(ctx, reason); err != nil {
		return err
	}
	if own := b.ownDefinitions(); len(own) > 0 { // declared meanwhile
		return status.Errorf(codes.FailedPrecondition, "this node has definitions of its own that joining would discard: %s", strings.Join(own, ", "))
	}
	return b.cluster.meta.Reset(ctx)
}
