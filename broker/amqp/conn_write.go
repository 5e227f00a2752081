package amqp

import (
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
)

// The output side of a connection: frames are appended to one buffer under
// outMu; the goroutine that finishes a batch writes it inline when it can,
// and the writer goroutine takes what the socket did not.

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
	return len(c.out) > 0
}

// send appends frames to the output buffer under outMu via fn and wakes the writer.
func (c *conn) send(fn func(b []byte) []byte) {
	c.outMu.Lock()
	c.out = fn(c.out)
	c.outMu.Unlock()
	c.signal()
}

// sendQuiet appends frames like send without waking the writer: the
// reader's flush (before it blocks on anything) writes them. Reader only.
func (c *conn) sendQuiet(fn func(b []byte) []byte) {
	c.outMu.Lock()
	c.out = fn(c.out)
	c.outMu.Unlock()
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
		c.outMu.Unlock()
		if len(buf) > 0 {
			wrote = true
			_, err := c.nc.Write(buf)
			c.outMu.Lock()
			c.writing = false
			again := len(c.out) > 0
			c.outMu.Unlock()
			if err != nil {
				c.shutdownSocket()
				return
			}
			c.sendOct.Add(uint64(len(buf)))
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
