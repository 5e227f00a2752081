// Command netcheck checks what a cluster gives a pod: name resolution from the
// host (against the DNS Service's IP) and from inside a pod (with the pod's own
// resolv.conf and search path), TCP through Services, writable volumes.
// hack/local-cluster.sh uses it to wait for DNS and in its check command, and
// builds it into docker.io/warrenmq/netcheck:local for test pods.
//
// Usage:
//
//	netcheck lookup [-server IP:PORT] [-timeout 5s] NAME
//	netcheck write FILE                 (write FILE, sync, read it back: a volume is writable)
//	netcheck serve [-listen :8080]      (answer each TCP connection with a greeting until SIGTERM)
//	netcheck connect [-timeout 5s] HOST:PORT   (read that greeting)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "netcheck:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: netcheck lookup [-server IP:PORT] [-timeout 5s] NAME | write FILE | serve [-listen :8080] | connect [-timeout 5s] HOST:PORT")
	}
	switch args[0] {
	case "lookup":
		return lookup(args[1:])
	case "write":
		if len(args) != 2 {
			return errors.New("write wants exactly one FILE")
		}
		return writeFile(args[1])
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return serve(ctx, args[1:], nil)
	case "connect":
		return connect(args[1:])
	default:
		return fmt.Errorf("unknown command %q (want lookup, write, serve or connect)", args[0])
	}
}

func lookup(args []string) error {
	fs := flag.NewFlagSet("lookup", flag.ContinueOnError)
	server := fs.String("server", "", "DNS server IP:PORT (default: the system resolver, /etc/resolv.conf)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("lookup wants exactly one NAME")
	}
	r := &net.Resolver{PreferGo: true}
	if *server != "" {
		addr := *server
		r.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	addrs, err := r.LookupHost(ctx, fs.Arg(0))
	if err != nil {
		return fmt.Errorf("lookup %s: %w", fs.Arg(0), err)
	}
	fmt.Printf("%s %s\n", fs.Arg(0), strings.Join(addrs, " "))
	return nil
}

func writeFile(name string) error {
	want := fmt.Sprintf("written by uid %d at %s\n", os.Getuid(), time.Now().UTC().Format(time.RFC3339Nano))
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if _, err := f.WriteString(want); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if string(got) != want {
		return fmt.Errorf("read back %q, wrote %q", got, want)
	}
	fmt.Print(string(got))
	return nil
}

// greeting is what serve writes to every connection and connect expects.
const greeting = "netcheck\n"

// serve answers TCP connections with the greeting until ctx ends; ready, when
// not nil, receives the listening address.
func serve(ctx context.Context, args []string, ready chan<- net.Addr) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "TCP address to answer on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Printf("netcheck: serving on %s until SIGTERM\n", ln.Addr())
	if ready != nil {
		ready <- ln.Addr()
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("serve: %w", err)
		}
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte(greeting))
		c.Close()
	}
}

func connect(args []string) error {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("connect wants exactly one HOST:PORT")
	}
	c, err := net.DialTimeout("tcp", fs.Arg(0), *timeout)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(*timeout))
	buf := make([]byte, len(greeting))
	if _, err := io.ReadFull(c, buf); err != nil {
		return fmt.Errorf("connect %s: read greeting: %w", fs.Arg(0), err)
	}
	if string(buf) != greeting {
		return fmt.Errorf("connect %s: greeting %q, want %q", fs.Arg(0), buf, greeting)
	}
	fmt.Printf("connected to %s (%s)\n", fs.Arg(0), c.RemoteAddr())
	return nil
}
