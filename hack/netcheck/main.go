// Command netcheck resolves names, for checking cluster DNS from the host
// (against the DNS Service's IP) and from inside a pod (with the pod's own
// resolv.conf and search path). hack/local-cluster.sh uses it to wait for
// DNS, and builds it into docker.io/warrenmq/netcheck:local for test pods.
//
// Usage:
//
//	netcheck lookup [-server IP:PORT] [-timeout 5s] NAME
//	netcheck write FILE        (write FILE, sync, read it back: a volume is writable)
//	netcheck serve             (stay up until SIGTERM; a pod to exec into)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
		return errors.New("usage: netcheck lookup [-server IP:PORT] [-timeout 5s] NAME | netcheck write FILE | netcheck serve")
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
		fmt.Println("netcheck: serving until SIGTERM")
		<-ctx.Done()
		return nil
	default:
		return fmt.Errorf("unknown command %q (want lookup, write or serve)", args[0])
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
