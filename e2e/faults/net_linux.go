//go:build linux

package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stateDir holds one file per run (named by the run's id) with the pid of the
// test process and the run's directory: how a later run tells a live run's
// namespaces from the leftovers of a killed one.
const stateDir = "/run/warren-faults"

// nsPrefix starts the name of every network namespace the harness creates:
// wfault-<id>-n<i>. Interface names are wf<id>br (the bridge), wf<id>h<i>
// (the host end of node i's veth) and wf<id>n<i> (the node's end): at most
// 9 characters, under IFNAMSIZ.
const nsPrefix = "wfault-"

// linkName and nsName match the harness's interface and namespace names and
// capture the run id.
var (
	linkName = regexp.MustCompile(`^wf([0-9a-f]{4})(br|h[0-9]+|n[0-9]+)$`)
	nsName   = regexp.MustCompile(`^` + nsPrefix + `([0-9a-f]{4})-n[0-9]+$`)
)

// cmdTimeout bounds every ip/iptables/tc command.
const cmdTimeout = 20 * time.Second

// run runs one command and returns its output, or an error carrying the
// command line and what it printed.
func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// inNS runs a command inside network namespace ns.
func inNS(ns, name string, args ...string) (string, error) {
	return run("ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Missing reports why the harness cannot run on this machine (not root, no
// network namespaces, a tool missing), or "" when it can.
func Missing() string {
	if os.Geteuid() != 0 {
		return "the fault harness needs root (network namespaces, iptables, tc)"
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return "this kernel has no network namespaces (/proc/self/ns/net)"
	}
	var missing []string
	for _, tool := range []string{"ip", "iptables", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return "missing tools: " + strings.Join(missing, ", ") + " (Debian: apt-get install iproute2 iptables)"
	}
	return ""
}

// newID picks a run id (4 hex digits) not used by a live or stale run.
func newID() (string, error) {
	for range 32 {
		b := make([]byte, 2)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		id := hex.EncodeToString(b)
		if _, err := os.Stat(filepath.Join(stateDir, id)); errors.Is(err, os.ErrNotExist) {
			if _, err := os.Stat("/sys/class/net/wf" + id + "br"); errors.Is(err, os.ErrNotExist) {
				return id, nil
			}
		}
	}
	return "", errors.New("no free run id")
}

// writeState records this run so that a later run can clean it up if this
// process dies without doing so.
func writeState(id, dir string) error {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(stateDir, id), []byte(fmt.Sprintf("%d\n%s\n", os.Getpid(), dir)), 0o644)
}

// runAlive reports whether the process that recorded run id still runs.
func runAlive(id string) bool {
	b, err := os.ReadFile(filepath.Join(stateDir, id))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// removeStale tears down what runs whose process is gone left behind: their
// namespaces (and the processes in them), bridges, veths, host FORWARD rules,
// run directories and state files. Live runs are left alone.
func removeStale() error {
	ids := map[string]bool{}
	if entries, err := os.ReadDir(stateDir); err == nil {
		for _, e := range entries {
			ids[e.Name()] = true
		}
	}
	if out, err := run("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			if m := nsName.FindStringSubmatch(name); m != nil {
				ids[m[1]] = true
			}
		}
	}
	if entries, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range entries {
			if m := linkName.FindStringSubmatch(e.Name()); m != nil {
				ids[m[1]] = true
			}
		}
	}
	var errs []error
	for id := range ids {
		if !runAlive(id) {
			errs = append(errs, teardown(id))
		}
	}
	return errors.Join(errs...)
}

// teardown removes everything of run id: processes in its namespaces, the
// namespaces (which takes the veths with them), the bridge, the FORWARD rule,
// the run directory and the state file. It goes on past errors and returns
// them all.
func teardown(id string) error {
	var errs []error
	if out, err := run("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			ns, _, _ := strings.Cut(strings.TrimSpace(line), " ")
			if !strings.HasPrefix(ns, nsPrefix+id+"-") {
				continue
			}
			if pids, err := run("ip", "netns", "pids", ns); err == nil {
				for _, p := range strings.Fields(pids) {
					if pid, err := strconv.Atoi(p); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			if _, err := run("ip", "netns", "del", ns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if entries, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "wf"+id) {
				if _, err := run("ip", "link", "del", e.Name()); err != nil && linkExists(e.Name()) {
					errs = append(errs, err)
				}
			}
		}
	}
	errs = append(errs, removeForwardRules(id))
	if b, err := os.ReadFile(filepath.Join(stateDir, id)); err == nil {
		if lines := strings.Split(string(b), "\n"); len(lines) > 1 && strings.Contains(lines[1], "warren-faults-") {
			errs = append(errs, os.RemoveAll(lines[1]))
		}
	}
	if err := os.Remove(filepath.Join(stateDir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

// forwardComment tags the host FORWARD rule of run id.
func forwardComment(id string) string { return "warren-faults-" + id }

// allowForward lets frames cross the bridge when bridged traffic goes through
// the host's iptables (br_netfilter with bridge-nf-call-iptables = 1, as on
// hosts that run Docker, whose FORWARD policy is DROP).
func allowForward(id, bridge string) error {
	b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return nil
	}
	_, err = run("iptables", "-w", "5", "-I", "FORWARD", "-i", bridge, "-o", bridge,
		"-m", "comment", "--comment", forwardComment(id), "-j", "ACCEPT")
	return err
}

// removeForwardRules deletes the host FORWARD rules of run id.
func removeForwardRules(id string) error {
	out, err := run("iptables", "-w", "5", "-S", "FORWARD")
	if err != nil {
		return nil // no iptables here: nothing was added
	}
	var errs []error
	for _, rule := range strings.Split(out, "\n") {
		if !strings.HasPrefix(rule, "-A FORWARD ") || !strings.Contains(rule, forwardComment(id)) {
			continue
		}
		args := append([]string{"-w", "5", "-D"}, strings.Fields(strings.TrimPrefix(rule, "-A "))...)
		if _, err := run("iptables", args...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pickSubnet returns a private /24 (10.213.x.0/24) that no interface or route
// of the host uses yet, starting from a value derived from the run id.
func pickSubnet(id string) (netip.Prefix, error) {
	addrs, err := run("ip", "-o", "-4", "addr", "show")
	if err != nil {
		return netip.Prefix{}, err
	}
	routes, err := run("ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return netip.Prefix{}, err
	}
	start, _ := strconv.ParseUint(id[:2], 16, 8)
	for i := range 256 {
		x := byte((int(start) + i) % 256)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, x, 0}), 24)
		needle := fmt.Sprintf("10.213.%d.", x)
		if !strings.Contains(addrs, needle) && !strings.Contains(routes, needle) {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("no free 10.213.x.0/24")
}

// hostAddr and nodeAddr are the addresses on a run's /24: .1 for the host's
// end of the bridge, .11, .12, ... for the nodes.
func hostAddr(p netip.Prefix) netip.Addr { return nth(p, 1) }

func nodeAddr(p netip.Prefix, i int) netip.Addr { return nth(p, 10+i) }

func nth(p netip.Prefix, n int) netip.Addr {
	a := p.Addr().As4()
	a[3] = byte(n)
	return netip.AddrFrom4(a)
}

// setupBridge creates the run's bridge with the host's address on it.
func setupBridge(bridge string, host netip.Addr) error {
	steps := [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"addr", "add", host.String() + "/24", "dev", bridge},
		{"link", "set", bridge, "up"},
	}
	for _, s := range steps {
		if _, err := run("ip", s...); err != nil {
			return err
		}
	}
	return nil
}

// setupNode creates node n's namespace, its veth pair (host end on the
// bridge) and its address, and brings loopback up.
func setupNode(n *Node, bridge string) error {
	steps := [][]string{
		{"netns", "add", n.Netns},
		{"link", "add", n.hostVeth, "type", "veth", "peer", "name", n.nsVeth},
		{"link", "set", n.nsVeth, "netns", n.Netns},
		{"link", "set", n.hostVeth, "master", bridge},
		{"link", "set", n.hostVeth, "up"},
		{"-n", n.Netns, "addr", "add", n.IP.String() + "/24", "dev", n.nsVeth},
		{"-n", n.Netns, "link", "set", n.nsVeth, "up"},
		{"-n", n.Netns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if _, err := run("ip", s...); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}
