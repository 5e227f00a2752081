// Command warren-e2e-client is the end-to-end suite's rolling-update client.
// It runs in a pod of the cluster under test, publishes numbered persistent
// messages with publisher confirms through the Broker's client Service,
// reconnecting whenever its connection drops, and records what it saw: which
// ids were confirmed, which were in flight when a connection broke (in
// doubt), every reconnection and the longest time without a confirm. The
// suite drives it over HTTP through the API server's pod proxy:
//
//	GET  /status  progress so far (JSON)
//	POST /stop    stop publishing, wait for outstanding confirms, return the report
//	POST /verify?host=a&host=b...  drain the queue on each host (one connection
//	              per host, same credentials and vhost as --uri) and compare what
//	              is there with what was confirmed
//
// Usage: warren-e2e-client --uri amqp://user:pass@warren.ns.svc:5672 --queue e2e-roll
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func main() {
	var (
		uri    = flag.String("uri", os.Getenv("WARREN_URI"), "AMQP URI of the client Service (default $WARREN_URI)")
		queue  = flag.String("queue", "e2e-roll", "durable classic queue to publish to")
		listen = flag.String("listen", ":8080", "HTTP control address")
		rate   = flag.Int("rate", 300, "messages per second")
		window = flag.Int("window", 50, "unconfirmed messages allowed")
		maxDur = flag.Duration("max-duration", 20*time.Minute, "stop publishing after this long even without /stop")
	)
	flag.Parse()
	if *uri == "" {
		fmt.Fprintln(os.Stderr, "warren-e2e-client: --uri or $WARREN_URI is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := newPublisher(*uri, *queue, *rate, *window)
	pubCtx, cancelPub := context.WithTimeout(ctx, *maxDur)
	defer cancelPub()
	go p.run(pubCtx)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, p.report()) })
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, _ *http.Request) {
		cancelPub()
		<-p.done
		r := p.report()
		slog.Info("stopped", "report", r)
		writeJSON(w, r)
	})
	mux.HandleFunc("POST /verify", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-p.done:
		default:
			http.Error(w, "POST /stop first", http.StatusConflict)
			return
		}
		v, err := p.verify(r.Context(), r.URL.Query()["host"])
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		slog.Info("verified", "result", v)
		writeJSON(w, v)
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	slog.Info("listening", "addr", *listen, "queue", *queue, "rate", *rate)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "warren-e2e-client:", err)
		os.Exit(1)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// event is one connection loss or failed attempt the publisher saw.
type event struct {
	At       time.Time `json:"at"`
	Error    string    `json:"error"`
	InDoubt  int       `json:"in_doubt"` // published, not yet confirmed when it happened
	Attempts int       `json:"attempts"` // dial attempts before the next connection worked
	Down     string    `json:"down_for"` // until the next connection published again
}

// report is what the publisher saw.
type report struct {
	Published   int64     `json:"published"`
	Confirmed   int64     `json:"confirmed"`
	Nacked      int64     `json:"nacked"`
	InDoubt     int64     `json:"in_doubt"`
	Connections int       `json:"connections"`
	Events      []event   `json:"events"`
	LongestGap  string    `json:"longest_gap_without_confirm"`
	Started     time.Time `json:"started"`
	LastConfirm time.Time `json:"last_confirm"`
	Running     bool      `json:"running"`
}

type publisher struct {
	uri, queue    string
	rate, window  int
	done          chan struct{}
	mu            sync.Mutex
	state         []byte // per id: 0 unknown, 1 confirmed, 2 nacked, 3 in doubt
	r             report
	lastConfirmAt time.Time
	longestGap    time.Duration
}

const (
	stConfirmed = 1
	stNacked    = 2
	stInDoubt   = 3
)

func newPublisher(uri, queue string, rate, window int) *publisher {
	return &publisher{uri: uri, queue: queue, rate: rate, window: window, done: make(chan struct{})}
}

func (p *publisher) report() report {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.r
	r.Events = append([]event(nil), p.r.Events...)
	gap := p.longestGap
	if p.r.Running && !p.lastConfirmAt.IsZero() && time.Since(p.lastConfirmAt) > gap {
		gap = time.Since(p.lastConfirmAt)
	}
	r.LongestGap = gap.Round(time.Millisecond).String()
	r.LastConfirm = p.lastConfirmAt
	return r
}

func (p *publisher) mark(id int64, st byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state[id] = st
	switch st {
	case stConfirmed:
		p.r.Confirmed++
		now := time.Now()
		if !p.lastConfirmAt.IsZero() && now.Sub(p.lastConfirmAt) > p.longestGap {
			p.longestGap = now.Sub(p.lastConfirmAt)
		}
		p.lastConfirmAt = now
	case stNacked:
		p.r.Nacked++
	case stInDoubt:
		p.r.InDoubt++
	}
}

// run publishes until ctx ends, reconnecting after every failure.
func (p *publisher) run(ctx context.Context) {
	defer close(p.done)
	p.mu.Lock()
	p.r.Started, p.r.Running = time.Now(), true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.r.Running = false
		p.mu.Unlock()
	}()
	var next int64
	attempts := 0
	var lost *event
	for ctx.Err() == nil {
		attempts++
		published, err := p.session(ctx, &next, func() {
			// The connection works again: close the previous loss event.
			if lost != nil {
				p.mu.Lock()
				lost.Attempts = attempts
				lost.Down = time.Since(lost.At).Round(time.Millisecond).String()
				p.r.Events = append(p.r.Events, *lost)
				p.mu.Unlock()
				lost = nil
			}
			attempts = 0
		})
		if ctx.Err() != nil {
			return
		}
		if lost == nil && err != nil {
			lost = &event{At: time.Now(), Error: err.Error(), InDoubt: published}
			slog.Warn("connection lost", "err", err, "in_doubt", published)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	if lost != nil {
		p.mu.Lock()
		p.r.Events = append(p.r.Events, *lost)
		p.mu.Unlock()
	}
}

// session is one connection: declare the queue, publish at the set rate
// with at most window unconfirmed. It returns how many messages were left
// in doubt when it ended, and why it ended. up is called once the
// connection has published and had a confirm.
func (p *publisher) session(ctx context.Context, next *int64, up func()) (int, error) {
	conn, err := amqp091.DialConfig(p.uri, amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second), Heartbeat: 5 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("channel: %w", err)
	}
	if _, err := ch.QueueDeclare(p.queue, true, false, false, false, amqp091.Table{"x-queue-type": "classic"}); err != nil {
		return 0, fmt.Errorf("queue.declare: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		return 0, fmt.Errorf("confirm.select: %w", err)
	}
	p.mu.Lock()
	p.r.Connections++
	p.mu.Unlock()
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, p.window+1))
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	pending := map[uint64]int64{} // delivery tag -> id
	var tag uint64
	tick := time.NewTicker(time.Second / time.Duration(max(p.rate, 1)))
	defer tick.Stop()
	announced := false
	inDoubt := func(cause error) (int, error) {
		for _, id := range pending {
			p.mark(id, stInDoubt)
		}
		return len(pending), cause
	}
	handle := func(c amqp091.Confirmation) {
		id, ok := pending[c.DeliveryTag]
		if !ok {
			return
		}
		delete(pending, c.DeliveryTag)
		if c.Ack {
			p.mark(id, stConfirmed)
			if !announced {
				announced = true
				up()
			}
		} else {
			p.mark(id, stNacked)
		}
	}
	ctxDone := ctx.Done()
	var stopping <-chan time.Time // outstanding confirms after the stop
	for {
		if ctxDone == nil && len(pending) == 0 {
			return 0, nil
		}
		// Publish only when the window has room and the rate allows.
		var tickC <-chan time.Time
		if len(pending) < p.window && ctxDone != nil {
			tickC = tick.C
		}
		select {
		case c, ok := <-confirms:
			if !ok {
				return inDoubt(errors.New("confirm channel closed"))
			}
			handle(c)
		case e := <-closed:
			// Confirms that arrived before the close count.
			for len(confirms) > 0 {
				handle(<-confirms)
			}
			if e == nil {
				return inDoubt(errors.New("connection closed"))
			}
			return inDoubt(e)
		case <-stopping:
			return inDoubt(errors.New("no confirm for 30s after stop"))
		case <-ctxDone:
			ctxDone = nil
			stopping = time.After(30 * time.Second)
		case <-tickC:
			id := *next
			body := []byte(strconv.FormatInt(id, 10))
			p.mu.Lock()
			if int64(len(p.state)) <= id {
				p.state = append(p.state, make([]byte, len(p.state)+1024)...)
			}
			p.mu.Unlock()
			err := ch.PublishWithContext(context.Background(), "", p.queue, false, false, amqp091.Publishing{
				DeliveryMode: amqp091.Persistent, MessageId: string(body), Body: body})
			if err != nil {
				return inDoubt(fmt.Errorf("publish: %w", err))
			}
			tag++
			pending[tag] = id
			*next = id + 1
			p.mu.Lock()
			p.r.Published++
			p.mu.Unlock()
		}
	}
}

// verification is the comparison of what was confirmed with what the
// broker nodes hold.
type verification struct {
	Confirmed        int64            `json:"confirmed"`
	Found            int64            `json:"found"`
	PerHost          map[string]int64 `json:"per_host"`
	MissingConfirmed int64            `json:"missing_confirmed"`
	MissingSample    []int64          `json:"missing_sample,omitempty"`
	Duplicates       int64            `json:"duplicates"`
	InDoubtFound     int64            `json:"in_doubt_found"`
	InDoubtLost      int64            `json:"in_doubt_lost"`
	Unknown          int64            `json:"unknown"`
}

// verify drains the queue on every host and compares.
func (p *publisher) verify(ctx context.Context, hosts []string) (*verification, error) {
	if len(hosts) == 0 {
		return nil, errors.New("no host= given")
	}
	p.mu.Lock()
	state := append([]byte(nil), p.state...)
	confirmed := p.r.Confirmed
	p.mu.Unlock()
	seen := make([]int32, len(state))
	v := &verification{Confirmed: confirmed, PerHost: map[string]int64{}}
	for _, h := range hosts {
		n, err := p.drain(ctx, h, func(id int64) {
			if id < 0 || id >= int64(len(seen)) {
				v.Unknown++
				return
			}
			seen[id]++
		})
		if err != nil {
			return nil, fmt.Errorf("drain %s: %w", h, err)
		}
		v.PerHost[h] = n
		v.Found += n
	}
	for id, st := range state {
		switch {
		case seen[id] > 1:
			v.Duplicates += int64(seen[id] - 1)
		}
		switch st {
		case stConfirmed:
			if seen[id] == 0 {
				v.MissingConfirmed++
				if len(v.MissingSample) < 20 {
					v.MissingSample = append(v.MissingSample, int64(id))
				}
			}
		case stInDoubt:
			if seen[id] > 0 {
				v.InDoubtFound++
			} else {
				v.InDoubtLost++
			}
		}
	}
	return v, nil
}

// drain consumes every message of the queue on one host (passive declare
// first: a node that never had the queue holds none of its messages).
func (p *publisher) drain(ctx context.Context, host string, found func(int64)) (int64, error) {
	u, err := url.Parse(p.uri)
	if err != nil {
		return 0, err
	}
	if port := u.Port(); port != "" {
		u.Host = host + ":" + port
	} else {
		u.Host = host
	}
	// A pod just restarted has a new IP while its DNS name may resolve to
	// the old one for up to 30 s (CoreDNS's cache): dial until it answers.
	var conn *amqp091.Connection
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err = amqp091.DialConfig(u.String(), amqp091.Config{Dial: amqp091.DefaultDial(5 * time.Second)})
		var netErr net.Error
		if err == nil || !errors.As(err, &netErr) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(p.queue, true, false, false, false, amqp091.Table{"x-queue-type": "classic"})
	var aerr *amqp091.Error
	if errors.As(err, &aerr) && aerr.Code == amqp091.NotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if err := ch.Qos(500, 0, false); err != nil {
		return 0, err
	}
	deliveries, err := ch.Consume(p.queue, "", false, false, false, false, nil)
	if err != nil {
		return 0, err
	}
	var n int64
	idle := time.NewTimer(5 * time.Second)
	defer idle.Stop()
	for n < int64(q.Messages) {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return n, errors.New("consumer closed")
			}
			id, err := strconv.ParseInt(string(d.Body), 10, 64)
			if err != nil {
				id = -1
			}
			found(id)
			n++
			if err := d.Ack(false); err != nil {
				return n, err
			}
			idle.Reset(5 * time.Second)
		case <-idle.C:
			return n, fmt.Errorf("queue reported %d messages, got %d, then nothing for 5s", q.Messages, n)
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
	return n, nil
}
