package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/spf13/cobra"

	"github.com/warrenmq/warren/broker/amqp/wire"
)

type amqpFlags struct {
	uri, queue, json string
	progress         time.Duration
}

func (f *amqpFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.uri, "uri", "amqp://guest:guest@localhost:5672/", "AMQP URI")
	cmd.Flags().StringVar(&f.queue, "queue", "warren-perf", "queue (or stream) name")
	cmd.Flags().StringVar(&f.json, "json", "", `write the result as JSON to this file ("-": stdout)`)
	cmd.Flags().DurationVar(&f.progress, "progress", time.Second, "interval of progress lines on stderr (0: none)")
}

// streamOffsetArg turns --stream-offset into the x-stream-offset value:
// first, last, next, an interval such as 30m (strings), an offset
// (integer) or ts:<ms since epoch> (AMQP timestamp).
func streamOffsetArg(s string) (any, error) {
	switch {
	case s == "first" || s == "last" || s == "next":
		return s, nil
	case strings.HasPrefix(s, "ts:"):
		n, err := strconv.ParseInt(s[3:], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("stream offset %q: %w", s, err)
		}
		return time.UnixMilli(n), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	return s, nil // an interval, checked by the broker
}

// consumeRun is what one consume run counted.
type consumeRun struct {
	n, bytes int64
	last     time.Time // when the last message arrived
	err      error
}

func newAMQPConsumeCmd() *cobra.Command {
	var (
		f        amqpFlags
		offset   string
		client   string
		qos      int
		total    int64
		idle     time.Duration
		duration time.Duration
	)
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Consume a queue or stream with manual acks and a prefetch, report msg/s",
		Long: `Consume with basic.qos --qos and manual acks (multiple, every half prefetch).
For a stream, --stream-offset sets x-stream-offset. Stops after --messages, or
when nothing arrived for --idle (that idle time is not counted), or after
--duration.

--client amqp091 (the default) consumes with github.com/rabbitmq/amqp091-go, as
a Go application would. --client wire consumes with a minimal consumer on
Warren's own frame codec that reads deliveries straight from its socket
buffer: it costs a fraction of amqp091-go per message, so what it reports is
the broker's delivery rate rather than the client's.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			var args map[string]any
			if offset != "" {
				v, err := streamOffsetArg(offset)
				if err != nil {
					return err
				}
				args = map[string]any{"x-stream-offset": v}
			}
			ackEvery := int64(max(qos/2, 1))
			prog := startProgress(os.Stderr, "amqp consume "+f.queue, f.progress)
			start := time.Now()
			var run consumeRun
			var err error
			switch client {
			case "amqp091":
				run, err = consumeAMQP091(ctx, f, qos, args, total, ackEvery, idle, prog)
			case "wire":
				run, err = consumeWire(ctx, f, qos, args, total, ackEvery, idle, prog)
			default:
				err = fmt.Errorf("--client %q: want amqp091 or wire", client)
			}
			prog.end()
			if err != nil {
				return err
			}
			if run.last.IsZero() { // nothing arrived: no time counted
				run.last = start
			}
			r := &result{Mode: "amqp consume", Target: f.queue, Messages: run.n, Bytes: run.bytes,
				Params: map[string]any{"qos": qos, "stream_offset": offset, "client": client}}
			if run.err != nil {
				r.Error = run.err.Error()
			}
			r.finish(run.last.Sub(start))
			return r.output(cmd.OutOrStdout(), f.json)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&offset, "stream-offset", "", "x-stream-offset: first, last, next, an offset, ts:<ms>, or an interval such as 30m")
	cmd.Flags().StringVar(&client, "client", "amqp091", "consumer: amqp091 (amqp091-go) or wire (minimal, for measuring the broker)")
	cmd.Flags().IntVar(&qos, "qos", 200, "prefetch count")
	cmd.Flags().Int64Var(&total, "messages", 0, "stop after this many messages (0: until idle)")
	cmd.Flags().DurationVar(&idle, "idle", 2*time.Second, "stop when nothing arrived for this long")
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long")
	return cmd
}

// consumeAMQP091 consumes with amqp091-go. Setup errors are returned; an
// error during the run ends it and is reported in the result.
func consumeAMQP091(ctx context.Context, f amqpFlags, qos int, args map[string]any, total, ackEvery int64, idle time.Duration, prog *progress) (consumeRun, error) {
	var run consumeRun
	conn, err := amqp091.Dial(f.uri)
	if err != nil {
		return run, fmt.Errorf("connect %s: %w", f.uri, err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return run, err
	}
	if err := ch.Qos(qos, 0, false); err != nil {
		return run, fmt.Errorf("basic.qos: %w", err)
	}
	deliveries, err := ch.Consume(f.queue, "warren-perf", false, false, false, false, amqp091.Table(args))
	if err != nil {
		return run, fmt.Errorf("basic.consume on %s: %w", f.queue, err)
	}
	var last091 amqp091.Delivery
	timer := time.NewTimer(idle)
loop:
	for total <= 0 || run.n < total {
		select {
		case d, ok := <-deliveries:
			if !ok {
				run.err = errors.New("consumer cancelled or channel closed")
				break loop
			}
			run.n++
			run.bytes += int64(len(d.Body))
			run.last, last091 = time.Now(), d
			if run.n%ackEvery == 0 {
				if err := d.Ack(true); err != nil {
					run.err = err
					break loop
				}
			}
			if run.n%1024 == 0 {
				prog.count.Store(run.n)
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(idle)
		case <-timer.C:
			break loop
		case <-ctx.Done():
			run.last = time.Now()
			break loop
		}
	}
	if run.n%ackEvery != 0 && last091.DeliveryTag != 0 {
		_ = last091.Ack(true)
	}
	return run, nil
}

// consumeWire consumes with the minimal wire consumer. The idle limit is
// the socket's receive timeout: no read waits longer.
func consumeWire(ctx context.Context, f amqpFlags, qos int, args map[string]any, total, ackEvery int64, idle time.Duration, prog *progress) (consumeRun, error) {
	var run consumeRun
	c, err := dialWire(ctx, f.uri, f.queue, qos, wire.Table(args))
	if err != nil {
		return run, err
	}
	defer c.Close()
	if err := c.conn.SetIdle(idle); err != nil {
		return run, err
	}
	stop := context.AfterFunc(ctx, c.conn.Abort)
	defer stop()
	var tag, acked uint64
read:
	for total <= 0 || run.n < total {
		size, t, err := c.next()
		if err != nil {
			switch {
			case ctx.Err() != nil: // --duration is up
				run.last = time.Now()
			case errors.Is(err, errIdle):
			default:
				run.err = err
			}
			break read
		}
		run.n++
		run.bytes += size
		tag = t
		// The clock only when the socket buffer runs dry (the last message
		// of what arrived together) or at the end: reading it per message
		// cost this client more than a sixth of its time.
		if c.r.Buffered() == 0 || run.n == total {
			run.last = time.Now()
		}
		if run.n%ackEvery == 0 {
			if err := c.ack(tag); err != nil {
				if ctx.Err() == nil { // else --duration is up: the socket was shut
					run.err = err
				}
				run.last = time.Now()
				break read
			}
			acked = tag
		}
		if run.n%1024 == 0 {
			prog.count.Store(run.n)
		}
	}
	if tag > acked && ctx.Err() == nil {
		_ = c.ack(tag)
	}
	return run, nil
}

func newAMQPPublishCmd() *cobra.Command {
	var (
		f           amqpFlags
		exchange    string
		queueType   string
		size        int
		total       int64
		duration    time.Duration
		window      int
		persistent  bool
		withConfirm bool
	)
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Publish with confirms (one publisher), report msg/s",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if total <= 0 && duration <= 0 {
				return errors.New("give --messages or --duration")
			}
			ctx := cmd.Context()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			conn, err := amqp091.Dial(f.uri)
			if err != nil {
				return fmt.Errorf("connect %s: %w", f.uri, err)
			}
			defer conn.Close()
			ch, err := conn.Channel()
			if err != nil {
				return err
			}
			if queueType != "" {
				if _, err := ch.QueueDeclare(f.queue, true, false, false, false, amqp091.Table{"x-queue-type": queueType}); err != nil {
					return fmt.Errorf("declare %s: %w", f.queue, err)
				}
			}
			w := newConfirmWaiter()
			if withConfirm {
				if err := ch.Confirm(false); err != nil {
					return err
				}
				confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, window))
				go func() {
					for c := range confirms {
						if c.Ack {
							w.add(1, 0)
						} else {
							w.add(0, 1)
						}
					}
					w.close()
				}()
			}
			mode := amqp091.Transient
			if persistent {
				mode = amqp091.Persistent
			}
			msg := amqp091.Publishing{Body: bytes.Repeat([]byte{'x'}, size), DeliveryMode: mode}
			prog := startProgress(os.Stderr, "amqp publish "+f.queue, f.progress)
			start := time.Now()
			var sent int64
			for (total <= 0 || sent < total) && ctx.Err() == nil {
				if withConfirm && !w.waitAtLeast(sent+1-int64(window)) {
					break
				}
				if err := ch.PublishWithContext(context.Background(), exchange, f.queue, false, false, msg); err != nil {
					return fmt.Errorf("publish: %w", err)
				}
				sent++
				if sent%1024 == 0 {
					ok, _ := w.counts()
					if !withConfirm {
						ok = sent
					}
					prog.count.Store(ok)
				}
			}
			ok, failed := sent, int64(0)
			if withConfirm {
				w.waitAtLeast(sent)
				ok, failed = w.counts()
			}
			elapsed := time.Since(start)
			prog.end()
			r := &result{Mode: "amqp publish", Target: f.queue, Messages: ok, Bytes: ok * int64(size),
				Params: map[string]any{"size": size, "window": window, "confirm": withConfirm, "persistent": persistent}}
			if failed > 0 {
				r.Error = fmt.Sprintf("%d messages nacked", failed)
			}
			r.finish(elapsed)
			return r.output(cmd.OutOrStdout(), f.json)
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&exchange, "exchange", "", "exchange (default: the default exchange, routing key = --queue)")
	cmd.Flags().StringVar(&queueType, "declare", "", "declare --queue first with this x-queue-type (classic, quorum, stream)")
	cmd.Flags().IntVar(&size, "size", 12, "message body bytes")
	cmd.Flags().Int64Var(&total, "messages", 0, "messages to publish (0: until --duration)")
	cmd.Flags().DurationVar(&duration, "duration", 0, "how long to publish")
	cmd.Flags().IntVar(&window, "window", 1000, "unconfirmed messages allowed")
	cmd.Flags().BoolVar(&persistent, "persistent", true, "delivery mode 2")
	cmd.Flags().BoolVar(&withConfirm, "confirm", true, "publisher confirms")
	return cmd
}
