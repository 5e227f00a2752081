package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/spf13/cobra"
)

// newAMQPDeclareCmd measures metadata writes: durable queue declares (each
// answered once the metadata is durable: on a cluster, committed by a
// majority), from --connections connections at once, each declaring new
// names one after the other; the queues are deleted afterwards unless
// --keep.
func newAMQPDeclareCmd() *cobra.Command {
	var (
		f        amqpFlags
		conns    int
		total    int64
		duration time.Duration
		keep     bool
	)
	cmd := &cobra.Command{
		Use:   "declare",
		Short: "Declare durable queues from several connections at once, report declares/s",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if total <= 0 && duration <= 0 {
				return errors.New("give --messages (declares) or --duration")
			}
			if conns < 1 {
				return errors.New("--connections must be at least 1")
			}
			ctx := cmd.Context()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			channels := make([]*amqp091.Channel, conns)
			for i := range channels {
				conn, err := amqp091.Dial(f.uri)
				if err != nil {
					return fmt.Errorf("connect %s: %w", f.uri, err)
				}
				defer conn.Close()
				if channels[i], err = conn.Channel(); err != nil {
					return err
				}
			}
			prog := startProgress(os.Stderr, "amqp declare "+f.queue, f.progress)
			var done atomic.Int64
			names := make([][]string, conns)
			errs := make([]error, conns)
			start := time.Now()
			var wg sync.WaitGroup
			for i, ch := range channels {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ctx.Err() == nil; n++ {
						if total > 0 && done.Add(1) > total {
							return
						}
						name := fmt.Sprintf("%s-%d-%d", f.queue, i, n)
						if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
							errs[i] = fmt.Errorf("declare %s: %w", name, err)
							return
						}
						names[i] = append(names[i], name)
						prog.count.Add(1)
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			prog.end()
			var declared int64
			for _, n := range names {
				declared += int64(len(n))
			}
			r := &result{Mode: "amqp declare", Target: f.queue, Messages: declared, Params: map[string]any{"connections": conns, "durable": true}}
			if err := errors.Join(errs...); err != nil {
				r.Error = err.Error()
			}
			r.finish(elapsed)
			if !keep {
				for i, ch := range channels {
					for _, name := range names[i] {
						if _, err := ch.QueueDelete(name, false, false, false); err != nil {
							return fmt.Errorf("delete %s: %w", name, err)
						}
					}
				}
			}
			return r.output(cmd.OutOrStdout(), f.json)
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&conns, "connections", 16, "connections declaring at once")
	cmd.Flags().Int64Var(&total, "messages", 0, "declares in all (0: until --duration)")
	cmd.Flags().DurationVar(&duration, "duration", 0, "how long to declare")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the declared queues")
	return cmd
}
