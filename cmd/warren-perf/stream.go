package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenmq/warren/broker/amqp10"
	"github.com/warrenmq/warren/broker/store/streamlog"
	"github.com/warrenmq/warren/broker/stream/client"
	"github.com/warrenmq/warren/broker/stream/proto"
)

// streamFlags are the flags every stream subcommand shares.
type streamFlags struct {
	uri, stream, json string
	socketBuffer      int
	progress          time.Duration
}

func (f *streamFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.uri, "uri", "rabbitmq-stream://guest:guest@localhost:5552/%2f", "stream protocol URI (user, password, host, port, vhost)")
	cmd.Flags().StringVar(&f.stream, "stream", "warren-perf", "stream name")
	cmd.Flags().StringVar(&f.json, "json", "", `write the result as JSON to this file ("-": stdout)`)
	cmd.Flags().IntVar(&f.socketBuffer, "socket-buffer", 1<<20, "socket send and receive buffer bytes (0: system default)")
	cmd.Flags().DurationVar(&f.progress, "progress", time.Second, "interval of progress lines on stderr (0: none)")
}

func (f *streamFlags) dial(ctx context.Context, o client.Options) (*client.Conn, error) {
	o.SocketBuffer = f.socketBuffer
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return client.Dial(dctx, f.uri, o)
}

func streamArgs(maxBytes, maxAge string) map[string]string {
	args := map[string]string{}
	if maxBytes != "" {
		args["max-length-bytes"] = maxBytes
	}
	if maxAge != "" {
		args["max-age"] = maxAge
	}
	return args
}

// confirmWaiter counts confirmed messages and wakes waiters.
type confirmWaiter struct {
	mu        sync.Mutex
	cond      *sync.Cond
	confirmed int64
	failed    int64
	closed    bool
}

func newConfirmWaiter() *confirmWaiter {
	w := &confirmWaiter{}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *confirmWaiter) add(ok, failed int) {
	w.mu.Lock()
	w.confirmed += int64(ok)
	w.failed += int64(failed)
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *confirmWaiter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// waitAtLeast waits until confirmed+failed >= n; false if the connection ended.
func (w *confirmWaiter) waitAtLeast(n int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.confirmed+w.failed < n && !w.closed {
		w.cond.Wait()
	}
	return w.confirmed+w.failed >= n
}

func (w *confirmWaiter) counts() (int64, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.confirmed, w.failed
}

func publishConn(ctx context.Context, f *streamFlags, maxBytes, maxAge string) (*client.Conn, *confirmWaiter, error) {
	w := newConfirmWaiter()
	conn, err := f.dial(ctx, client.Options{
		OnConfirm:      func(_ uint8, ids []uint64) { w.add(len(ids), 0) },
		OnPublishError: func(_ uint8, errs []proto.PublishingError) { w.add(0, len(errs)) },
	})
	if err != nil {
		return nil, nil, err
	}
	go func() {
		<-conn.Done()
		w.close()
	}()
	if err := conn.CreateStream(ctx, f.stream, streamArgs(maxBytes, maxAge), true); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("create stream %s: %w", f.stream, err)
	}
	if err := conn.DeclarePublisher(ctx, 1, "", f.stream); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("declare publisher on %s: %w", f.stream, err)
	}
	return conn, w, nil
}

func newStreamFillCmd() *cobra.Command {
	var (
		f                streamFlags
		total            int64
		perChunk, size   int
		window           int
		maxBytes, maxAge string
	)
	cmd := &cobra.Command{
		Use:   "fill",
		Short: "Write a stream with an exact chunk size",
		Long: `Write --messages messages of --size bytes in chunks of exactly --chunk
messages: each chunk is one publish frame, sent once the previous one is
confirmed (with --window 1), so the broker writes it as one chunk. A larger
--window pipelines chunks; brokers may then merge them.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if total <= 0 || perChunk <= 0 || size < 0 || window <= 0 {
				return errors.New("--messages and --chunk must be positive, --size non-negative, --window positive")
			}
			ctx := cmd.Context()
			conn, w, err := publishConn(ctx, &f, maxBytes, maxAge)
			if err != nil {
				return err
			}
			defer conn.Close()
			msg := client.DataMessage(bytes.Repeat([]byte{'x'}, size))
			prog := startProgress(os.Stderr, "stream fill "+f.stream, f.progress)
			start := time.Now()
			var frame []byte
			var sent int64
			for sent < total && ctx.Err() == nil {
				if !w.waitAtLeast(sent - int64((window-1)*perChunk)) {
					break
				}
				k := int(min(int64(perChunk), total-sent))
				frame = client.PublishFrame(frame[:0], 1, uint64(sent+1), k, msg)
				if err := conn.WriteFrame(frame); err != nil {
					return fmt.Errorf("publish: %w", err)
				}
				sent += int64(k)
				ok, _ := w.counts()
				prog.count.Store(ok)
			}
			w.waitAtLeast(sent)
			elapsed := time.Since(start)
			prog.end()
			ok, failed := w.counts()
			r := &result{Mode: "stream fill", Target: f.stream, Messages: ok, Chunks: (ok + int64(perChunk) - 1) / int64(perChunk), Bytes: ok * int64(size),
				Params: map[string]any{"chunk": perChunk, "size": size, "window": window, "requested": total}}
			if failed > 0 || ok < total {
				r.Error = fmt.Sprintf("%d confirmed of %d, %d refused", ok, total, failed)
				if err := conn.Err(); err != nil {
					r.Error += ": " + err.Error()
				}
			}
			r.finish(elapsed)
			if err := r.output(cmd.OutOrStdout(), f.json); err != nil {
				return err
			}
			if r.Error != "" {
				return errors.New(r.Error)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().Int64Var(&total, "messages", 1_000_000, "messages to write")
	cmd.Flags().IntVar(&perChunk, "chunk", 1, "messages per chunk")
	cmd.Flags().IntVar(&size, "size", 12, "message body bytes")
	cmd.Flags().IntVar(&window, "window", 1, "chunks in flight (1: exact chunk sizes)")
	cmd.Flags().StringVar(&maxBytes, "max-length-bytes", "", "stream retention by size when creating it")
	cmd.Flags().StringVar(&maxAge, "max-age", "", "stream retention by age when creating it (e.g. 1h)")
	return cmd
}

func newStreamPublishCmd() *cobra.Command {
	var (
		f                streamFlags
		total            int64
		duration         time.Duration
		size, batch      int
		window           int64
		maxBytes, maxAge string
	)
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Publish as fast as confirms allow (one publisher)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if batch <= 0 || window < int64(batch) {
				return errors.New("--batch must be positive and --window at least --batch")
			}
			if total <= 0 && duration <= 0 {
				return errors.New("give --messages or --duration")
			}
			ctx := cmd.Context()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			conn, w, err := publishConn(cmd.Context(), &f, maxBytes, maxAge)
			if err != nil {
				return err
			}
			defer conn.Close()
			msg := client.DataMessage(bytes.Repeat([]byte{'x'}, size))
			prog := startProgress(os.Stderr, "stream publish "+f.stream, f.progress)
			start := time.Now()
			var frame []byte
			var sent int64
			for (total <= 0 || sent < total) && ctx.Err() == nil {
				if !w.waitAtLeast(sent + int64(batch) - window) {
					break
				}
				k := int64(batch)
				if total > 0 {
					k = min(k, total-sent)
				}
				frame = client.PublishFrame(frame[:0], 1, uint64(sent+1), int(k), msg)
				if err := conn.WriteFrame(frame); err != nil {
					return fmt.Errorf("publish: %w", err)
				}
				sent += k
				ok, _ := w.counts()
				prog.count.Store(ok)
			}
			w.waitAtLeast(sent)
			elapsed := time.Since(start)
			prog.end()
			ok, failed := w.counts()
			r := &result{Mode: "stream publish", Target: f.stream, Messages: ok, Bytes: ok * int64(size),
				Params: map[string]any{"size": size, "batch": batch, "window": window}}
			if failed > 0 {
				r.Error = fmt.Sprintf("%d messages refused", failed)
			}
			r.finish(elapsed)
			return r.output(cmd.OutOrStdout(), f.json)
		},
	}
	f.add(cmd)
	cmd.Flags().Int64Var(&total, "messages", 0, "messages to publish (0: until --duration)")
	cmd.Flags().DurationVar(&duration, "duration", 0, "how long to publish")
	cmd.Flags().IntVar(&size, "size", 12, "message body bytes")
	cmd.Flags().IntVar(&batch, "batch", 100, "messages per publish frame")
	cmd.Flags().Int64Var(&window, "window", 100_000, "unconfirmed messages allowed")
	cmd.Flags().StringVar(&maxBytes, "max-length-bytes", "", "stream retention by size when creating it")
	cmd.Flags().StringVar(&maxAge, "max-age", "", "stream retention by age when creating it")
	return cmd
}

// parseOffset reads first, last, next, an offset, or ts:<ms since epoch>.
func parseOffset(s string) (proto.OffsetSpec, error) {
	switch s {
	case "first":
		return proto.OffsetSpec{Type: proto.OffsetFirst}, nil
	case "last":
		return proto.OffsetSpec{Type: proto.OffsetLast}, nil
	case "next":
		return proto.OffsetSpec{Type: proto.OffsetNext}, nil
	}
	if ts, ok := strings.CutPrefix(s, "ts:"); ok {
		n, err := strconv.ParseInt(ts, 10, 64)
		return proto.OffsetSpec{Type: proto.OffsetTimestamp, Value: n}, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return proto.OffsetSpec{}, fmt.Errorf("offset %q: want first, last, next, a number or ts:<ms>", s)
	}
	return proto.OffsetSpec{Type: proto.OffsetOffset, Value: n}, nil
}

// counts are a consumer's message, chunk and byte counts.
type counts struct{ msgs, chunks, bytes int64 }

func newStreamConsumeCmd() *cobra.Command {
	var (
		f        streamFlags
		offset   string
		total    int64
		credit   int
		decode   bool
		v2       bool
		duration time.Duration
	)
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Read a stream to its end (or --messages) and report msg/s",
		Long: `Subscribe from --offset and read until the chunk that was the last committed
one when the run started (or until --messages messages, or --duration). One
credit is granted back per chunk received, in batches of half --credit. With --decode (default) every
message is taken out of its chunk and its AMQP 1.0 data section located, as a
consumer would; without it only chunk headers are read.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := parseOffset(offset)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			var (
				msgs, chunks, nbytes, bad atomic.Int64
				conn                      *client.Conn
				finished                  = make(chan struct{})
				once                      sync.Once
				endChunk                  = int64(-1)
				pending                   int
				grant                     = max(1, credit/2)
				local                     counts
			)
			prog := startProgress(os.Stderr, "stream consume "+f.stream, f.progress)
			onDeliver := func(_ uint8, chunk []byte) {
				info, ok := client.ParseChunk(chunk)
				if !ok {
					bad.Add(1)
					return
				}
				data := chunk[proto.ChunkHeaderSize:]
				n := int64(0)
				if decode {
					it := streamlog.IterEntries(data, info.ChunkID)
					for {
						off, m, ok := it.Next()
						if !ok {
							break
						}
						if spec.Type == proto.OffsetOffset && off < uint64(spec.Value) {
							continue
						}
						if _, ok := amqp10.DataBody(m); !ok {
							bad.Add(1)
						}
						n++
					}
					if it.Err() != nil {
						bad.Add(1)
					}
				} else {
					n = int64(info.NumRecords)
				}
				// Counted here (the connection's reader goroutine) and
				// published to the atomics every 64 chunks and at the end:
				// four atomic adds per chunk were a fifth of the tool's work
				// on 1-message chunks. A run cut by --duration may miss the
				// last 63 chunks.
				local.msgs += n
				local.chunks++
				local.bytes += int64(info.DataLen)
				got := msgs.Load() + local.msgs
				end := (total > 0 && got >= total) || (total <= 0 && endChunk >= 0 && int64(info.ChunkID) >= endChunk)
				if local.chunks >= 64 || end {
					prog.count.Store(msgs.Add(local.msgs))
					chunks.Add(local.chunks)
					nbytes.Add(local.bytes)
					local = counts{}
				}
				// Credit goes back in batches of half the initial credit.
				if pending++; pending >= grant {
					_ = conn.Credit(1, uint16(pending))
					pending = 0
				}
				if end {
					once.Do(func() { close(finished) })
				}
			}
			conn, err = f.dial(ctx, client.Options{OnDeliver: func(s uint8, c []byte) { onDeliver(s, c) }})
			if err != nil {
				return err
			}
			defer conn.Close()
			if total <= 0 && duration <= 0 {
				stats, err := conn.StreamStats(ctx, f.stream)
				if err != nil {
					return fmt.Errorf("stream stats of %s: %w", f.stream, err)
				}
				endChunk = stats["committed_chunk_id"]
				if endChunk < 0 || spec.Type == proto.OffsetNext {
					return errors.New("nothing to read to the end of: the stream is empty or --offset is next (give --messages or --duration)")
				}
			}
			if v2 {
				if err := conn.ExchangeVersions(ctx, true); err != nil {
					return err
				}
			}
			start := time.Now()
			if err := conn.Subscribe(ctx, 1, f.stream, spec, uint16(credit), nil); err != nil {
				return fmt.Errorf("subscribe to %s: %w", f.stream, err)
			}
			var runErr error
			select {
			case <-finished:
			case <-ctx.Done():
			case <-conn.Done():
				runErr = conn.Err()
			}
			elapsed := time.Since(start)
			prog.end()
			r := &result{Mode: "stream consume", Target: f.stream, Messages: msgs.Load(), Chunks: chunks.Load(), Bytes: nbytes.Load(),
				Params: map[string]any{"offset": offset, "credit": credit, "decode": decode, "deliver_v2": v2}}
			if runErr != nil {
				r.Error = runErr.Error()
			}
			if b := bad.Load(); b > 0 {
				r.Error = fmt.Sprintf("%d malformed chunks or messages", b)
			}
			r.finish(elapsed)
			if err := r.output(cmd.OutOrStdout(), f.json); err != nil {
				return err
			}
			if r.Error != "" {
				return errors.New(r.Error)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&offset, "offset", "first", "first, last, next, an offset, or ts:<ms since epoch>")
	cmd.Flags().Int64Var(&total, "messages", 0, "stop after this many messages (0: read to the end)")
	cmd.Flags().IntVar(&credit, "credit", 10, "initial credit (chunks)")
	cmd.Flags().BoolVar(&decode, "decode", true, "iterate every message of every chunk")
	cmd.Flags().BoolVar(&v2, "deliver-v2", false, "ask for deliver v2 (committed chunk id)")
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long")
	return cmd
}
