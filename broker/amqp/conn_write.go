package amqp

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
)

// The output side of a connection: frames are appended to one buffer under
// outMu; the goroutine that finishes a batch writes it inline when it can,
// and the writer goroutine takes what the socket did not.
//
// The output is bounded twice. Deliveries stop at outputHighWater (queues
// wait for the writer, consumers are woken once it drained). Everything
// else the client's own frames cause (confirms, basic.return with its
// body, method replies, basic.get-ok) is bounded by
// Config.OutputBufferLimit: once the buffer and what the writer holds
// exceed it, the reader stops reading the client's frames until the
// writer has drained them to half the limit; the socket's kernel buffers
// fill and TCP pushes back on the client, as RabbitMQ's flow control does.
// The cost on the hot path is one atomic load per frame read and a
// compare per append under outMu.

// outputHighWater is the output buffer size above which queues stop
// delivering to a connection until the writer drains it.
const outputHighWater = 1 << 20

// inlineWriteMax is the most flushInline writes: a small batch (confirms,
// a few deliveries) goes out at once from the goroutine that made it;
// bigger ones go to the writer goroutine, so a queue's goroutine does not
// spend its time copying into socket buffers while it could be delivering.
const inlineWriteMax = 32 << 10

// flushInline writes the output buffer on the calling goroutine as far as
// the socket takes it without blocking, and leaves the rest (if any) to
// the writer goroutine. Goroutines call it when they finish a batch (the
// reader before it blocks on the socket, a queue at the end of its turn):
// their frames go out without waking the writer, and a goroutine never
// waits on a slow client.
// It reports whether output remains for the writer.
func (c *conn) flushInline() (rest bool) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.sock == nil || c.writing || len(c.out) == 0 || len(c.out) > inlineWriteMax || len(c.waiters) > 0 {
		return len(c.out) > 0
	}
	// A full socket or an error leaves the rest to the writer goroutine,
	// which blocks on the socket or sees the error.
	n, _ := c.sock.WriteNow(c.out)
	if n == 0 {
		return true
	}
	c.sendOct.Add(uint64(n))
	c.wroteInline.Store(true)
	c.out = c.out[:copy(c.out, c.out[n:])]
	c.drainedLocked()
	return len(c.out) > 0
}

// send appends frames to the output buffer under outMu via fn and wakes the writer.
func (c *conn) send(fn func(b []byte) []byte) {
	c.outMu.Lock()
	c.out = fn(c.out)
	c.checkOutputLocked()
	c.outMu.Unlock()
	c.signal()
}

// sendQuiet appends frames like send without waking the writer: the
// reader's flush (before it blocks on anything) writes them. For the
// reader's own frames, and for deferred confirms
// (queue.DeferredConfirmer), whose Flush writes them.
func (c *conn) sendQuiet(fn func(b []byte) []byte) {
	c.outMu.Lock()
	c.out = fn(c.out)
	c.checkOutputLocked()
	c.outMu.Unlock()
}

// checkOutputLocked stops the reader (outputOver) when the output is over
// Config.OutputBufferLimit. c.outMu is held.
func (c *conn) checkOutputLocked() {
	if len(c.out)+c.inflight > c.srv.cfg.OutputBufferLimit && !c.outputOver.Load() {
		c.outputOver.Store(true)
	}
}

// drainedLocked lets the reader go on once the output is down to half
// Config.OutputBufferLimit. c.outMu is held.
func (c *conn) drainedLocked() {
	if c.outputOver.Load() && len(c.out)+c.inflight <= c.srv.cfg.OutputBufferLimit/2 {
		c.outputOver.Store(false)
		select {
		case c.outputDrained <- struct{}{}:
		default:
		}
	}
}

// waitOutput holds the reader while the output is over its limit (see
// outputOver): the client's frames stay in the socket. What the reader
// batched goes to the queues and the output to the writer first. A client
// that takes no output for two heartbeat intervals meanwhile is cut off,
// as one whose heartbeats stopped: the writer, blocked on its socket, shows
// no other sign of life.
func (c *conn) waitOutput(ctx context.Context) error {
	if err := c.flushPublishes(ctx); err != nil {
		return err
	}
	c.flush()
	var timeout <-chan time.Time
	if c.heartbeat > 0 {
		t := time.NewTicker(2 * c.heartbeat)
		defer t.Stop()
		timeout = t.C
	}
	sent := c.sendOct.Load()
	for c.outputOver.Load() {
		select {
		case <-c.outputDrained:
		case <-timeout:
			now := c.sendOct.Load()
			if now == sent {
				return fmt.Errorf("client takes no output, timeout: %s", 2*c.heartbeat)
			}
			sent = now
		case <-c.done:
			return net.ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// flush writes what is buffered inline, and wakes the writer for whatever
// the socket did not take. The reader calls it before anything that may
// block it, so frames from sendQuiet never wait.
func (c *conn) flush() {
	if c.flushInline() {
		c.signal()
	}
}

func (c *conn) signal() {
	select {
	case c.outSignal <- struct{}{}:
	default:
	}
}

func (c *conn) sendMethod(ch uint16, m wire.Method) {
	c.send(func(b []byte) []byte { return wire.AppendMethodFrame(b, ch, m) })
}

// outputFullLocked reports whether the output buffer is over its
// high-water mark; if so wake is called once the writer has drained it.
// c.outMu is held.
func (c *conn) outputFullLocked(wake func()) bool {
	if len(c.out) < outputHighWater {
		return false
	}
	c.waiters = append(c.waiters, wake)
	return true
}

func (c *conn) writeLoop() {
	defer close(c.writerDone)
	var spare []byte
	var idle *time.Ticker
	var tick <-chan time.Time
	if c.heartbeat > 0 {
		idle = time.NewTicker(c.heartbeat / 2)
		defer idle.Stop()
		tick = idle.C
	}
	wrote := true
	stopping := false
	for {
		select {
		case <-c.outSignal:
		case <-c.stopWriting:
			stopping = true
		case <-tick:
			if c.wroteInline.Swap(false) {
				wrote = true
			}
			if !wrote {
				c.send(wire.AppendHeartbeat)
			}
			wrote = false
			continue
		case <-c.done:
			return
		}
		c.outMu.Lock()
		buf := c.out
		c.out = spare[:0]
		waiters := c.waiters
		c.waiters = nil
		c.writing = len(buf) > 0
		c.inflight = len(buf)
		c.outMu.Unlock()
		if len(buf) > 0 {
			wrote = true
			again, err := c.writeOut(buf)
			if err != nil {
				c.shutdownSocket()
				return
			}
			if again {
				c.signal()
			}
		}
		if cap(buf) > 4<<20 {
			buf = nil
		}
		spare = buf
		for _, w := range waiters {
			w()
		}
		if stopping {
			c.outMu.Lock()
			empty := len(c.out) == 0
			c.outMu.Unlock()
			if empty {
				return
			}
		}
	}
}

// writeChunk is the most the writer hands the socket in one write: what
// the client takes counts as it goes (sendOct, drainedLocked), not once a
// large buffer is all out.
const writeChunk = 256 << 10

// writeOut writes buf, which the writer took from the output buffer, and
// reports whether more output is waiting.
func (c *conn) writeOut(buf []byte) (again bool, err error) {
	for {
		n := min(len(buf), writeChunk)
		_, err = c.nc.Write(buf[:n])
		buf = buf[n:]
		if err == nil {
			c.sendOct.Add(uint64(n))
		}
		if len(buf) > 0 && err == nil {
			if c.outputOver.Load() {
				c.outMu.Lock()
				c.inflight = len(buf)
				c.drainedLocked()
				c.outMu.Unlock()
			}
			continue
		}
		c.outMu.Lock()
		c.writing = false
		c.inflight = 0
		c.drainedLocked()
		again = len(c.out) > 0
		c.outMu.Unlock()
		return again, err
	}
}

// stopWriter lets the writer flush what is buffered, then waits for it.
func (c *conn) stopWriter() {
	_ = c.nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
	close(c.stopWriting)
	select {
	case <-c.writerDone:
	case <-time.After(3 * time.Second):
	}
}

func (c *conn) shutdownSocket() {
	c.closeOnce.Do(func() {
		close(c.done)
		_ = c.nc.Close()
	})
}
