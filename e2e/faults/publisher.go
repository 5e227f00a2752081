package faults

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// PublisherConfig configures a confirming publisher.
type PublisherConfig struct {
	// Dial opens the connection to publish on. It is called again after the
	// connection fails (the node was killed, paused past the heartbeat,
	// partitioned away), so it may pick another node.
	Dial func() (*amqp.Connection, error)
	// Exchange and RoutingKey address every message ("" and a queue name:
	// the default exchange).
	Exchange, RoutingKey string
	// Prefix starts every message id (ids are Prefix + a sequence number).
	Prefix string
	// Limit stops the publisher after that many messages published (0: until
	// Stop).
	Limit int
	// Window is how many messages may await their confirm (default 64).
	Window int
	// Body is every message's body (default 100 bytes).
	Body []byte
}

// Publisher publishes persistent messages with publisher confirms and
// records the id of every message the broker confirmed. A message the broker
// nacked, or whose connection failed before its confirm, is not confirmed:
// the broker promised nothing about it.
type Publisher struct {
	cfg    PublisherConfig
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	confirmed map[string]bool
	published int
	nacked    int
	dialErrs  int
	lastErr   error
}

// StartPublisher starts publishing in a goroutine until Stop (or Limit).
func StartPublisher(cfg PublisherConfig) *Publisher {
	if cfg.Window <= 0 {
		cfg.Window = 64
	}
	if cfg.Body == nil {
		cfg.Body = make([]byte, 100)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{cfg: cfg, cancel: cancel, done: make(chan struct{}), confirmed: map[string]bool{}}
	go p.loop(ctx)
	return p
}

// PublishStats is what a publisher did.
type PublishStats struct {
	Published int   // messages handed to a connection
	Confirmed int   // of those, confirmed (ack) by the broker
	Nacked    int   // nacked, or unconfirmed when their connection failed
	Redials   int   // connections that failed or could not be opened
	LastErr   error // the last connection error
}

func (s PublishStats) String() string {
	return fmt.Sprintf("published %d, confirmed %d, nacked or unconfirmed %d, redials %d (last error: %v)",
		s.Published, s.Confirmed, s.Nacked, s.Redials, s.LastErr)
}

// Stats returns the counts so far.
func (p *Publisher) Stats() PublishStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PublishStats{Published: p.published, Confirmed: len(p.confirmed), Nacked: p.nacked, Redials: p.dialErrs, LastErr: p.lastErr}
}

// Confirmed returns the ids of the confirmed messages.
func (p *Publisher) Confirmed() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]bool, len(p.confirmed))
	for id := range p.confirmed {
		out[id] = true
	}
	return out
}

// Stop stops publishing, waits for the confirms of what is in flight (at
// most a few seconds) and returns the stats.
func (p *Publisher) Stop() PublishStats {
	p.cancel()
	<-p.done
	return p.Stats()
}

// Done is closed when the publisher has stopped (Stop, or Limit reached).
func (p *Publisher) Done() <-chan struct{} { return p.done }

func (p *Publisher) loop(ctx context.Context) {
	defer close(p.done)
	seq := 0
	for ctx.Err() == nil && (p.cfg.Limit == 0 || seq < p.cfg.Limit) {
		conn, err := p.cfg.Dial()
		if err != nil {
			p.noteErr(err)
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		seq, err = p.session(ctx, conn, seq)
		conn.Close()
		if err != nil {
			p.noteErr(err)
			sleep(ctx, 100*time.Millisecond)
		}
	}
}

func (p *Publisher) noteErr(err error) {
	p.mu.Lock()
	p.dialErrs++
	p.lastErr = err
	p.mu.Unlock()
}

type inflight struct {
	id string
	dc *amqp.DeferredConfirmation
}

// session publishes on one connection until it fails, ctx ends or Limit is
// reached; it returns the next sequence number.
func (p *Publisher) session(ctx context.Context, conn *amqp.Connection, seq int) (int, error) {
	ch, err := conn.Channel()
	if err != nil {
		return seq, err
	}
	if err := ch.Confirm(false); err != nil {
		return seq, err
	}
	var window []inflight
	// settle waits for the oldest confirm; after ctx ends it still waits a
	// little, so what the broker confirmed in flight is counted.
	settle := func() error {
		f := window[0]
		window = window[1:]
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if ctx.Err() == nil {
			wctx = ctx
		}
		ack, err := f.dc.WaitContext(wctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		if err == nil && ack {
			p.confirmed[f.id] = true
			return nil
		}
		p.nacked++
		if err != nil {
			return err
		}
		return nil
	}
	defer func() {
		for len(window) > 0 {
			if settle() != nil {
				break
			}
		}
		p.mu.Lock()
		p.nacked += len(window)
		p.mu.Unlock()
	}()
	for ctx.Err() == nil && (p.cfg.Limit == 0 || seq < p.cfg.Limit) {
		if len(window) >= p.cfg.Window {
			if err := settle(); err != nil {
				return seq, err
			}
			continue
		}
		id := p.cfg.Prefix + strconv.Itoa(seq)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, p.cfg.Exchange, p.cfg.RoutingKey, false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent,
			MessageId:    id,
			Body:         p.cfg.Body,
		})
		if err != nil {
			return seq, err
		}
		seq++
		p.mu.Lock()
		p.published++
		p.mu.Unlock()
		window = append(window, inflight{id: id, dc: dc})
	}
	return seq, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// DrainReport is what Drain found.
type DrainReport struct {
	Confirmed  int      // confirmed messages expected
	Received   int      // deliveries (duplicates included)
	Duplicates int      // deliveries of an id already received
	Lost       []string // confirmed and never received, sorted
}

func (r DrainReport) String() string {
	s := fmt.Sprintf("confirmed %d, received %d (%d duplicates), lost %d", r.Confirmed, r.Received, r.Duplicates, len(r.Lost))
	if len(r.Lost) > 0 {
		n := min(len(r.Lost), 10)
		s += fmt.Sprintf(" (first: %v)", r.Lost[:n])
	}
	return s
}

// Drain consumes queue on conn (acking each delivery) until every confirmed
// id has been received, or no delivery came for idle, or ctx ends; it
// reports the confirmed messages it never received. Messages that were not
// confirmed may or may not come back; duplicates are counted, not errors
// (at-least-once).
func Drain(ctx context.Context, conn *amqp.Connection, queue string, confirmed map[string]bool, idle time.Duration) (DrainReport, error) {
	rep := DrainReport{Confirmed: len(confirmed)}
	ch, err := conn.Channel()
	if err != nil {
		return rep, err
	}
	defer ch.Close()
	if err := ch.Qos(1000, 0, false); err != nil {
		return rep, err
	}
	deliveries, err := ch.ConsumeWithContext(ctx, queue, "", false, false, false, false, nil)
	if err != nil {
		return rep, fmt.Errorf("consume %s: %w", queue, err)
	}
	seen := map[string]bool{}
	missing := len(confirmed)
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for missing > 0 {
		select {
		case d, ok := <-deliveries:
			if !ok {
				rep.Lost = lost(confirmed, seen)
				return rep, errors.New("drain: the channel closed")
			}
			rep.Received++
			if seen[d.MessageId] {
				rep.Duplicates++
			} else {
				seen[d.MessageId] = true
				if confirmed[d.MessageId] {
					missing--
				}
			}
			if err := d.Ack(false); err != nil {
				return rep, err
			}
			timer.Reset(idle)
		case <-timer.C:
			missing = 0
		case <-ctx.Done():
			rep.Lost = lost(confirmed, seen)
			return rep, ctx.Err()
		}
	}
	rep.Lost = lost(confirmed, seen)
	return rep, nil
}

func lost(confirmed, seen map[string]bool) []string {
	var out []string
	for id := range confirmed {
		if !seen[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
