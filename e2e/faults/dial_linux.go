//go:build linux

package faults

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/sys/unix"
)

// inNetns runs fn on an OS thread switched into network namespace ns and
// switches the thread back after. A socket belongs to the namespace it was
// created in, so sockets fn creates stay in ns once fn returns. If the
// thread cannot be switched back it is not reused: its goroutine exits
// locked, and the runtime ends the thread.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back from %s: %w", ns, err) // thread stays locked: discarded
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Dial opens a TCP connection to addr from inside node n's namespace (from
// n's address, subject to n's faults). A nil n dials from the host.
func (n *Node) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	if n == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	var conn net.Conn
	err := inNetns(n.Netns, func() error {
		var err error
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s from %s: %w", addr, n.Name, err)
	}
	return conn, nil
}

// DialAMQP opens an AMQP connection to url from node from's namespace (nil:
// from the host). timeout bounds the TCP connect and the AMQP handshake.
func DialAMQP(from *Node, url string, timeout time.Duration) (*amqp.Connection, error) {
	return amqp.DialConfig(url, amqp.Config{
		Heartbeat: 10 * time.Second,
		Locale:    "en_US",
		Dial: func(network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			conn, err := from.Dial(ctx, addr)
			if err != nil {
				return nil, err
			}
			// Cleared by amqp091 once the connection is open.
			if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	})
}
