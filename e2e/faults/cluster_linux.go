//go:build linux

package faults

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warrenmq/warren/broker/brokertest"
)

// Options configure Start.
type Options struct {
	// Bin is the warren binary; empty builds cmd/warren for this call
	// (brokertest.BuildWarren). Tests that start several clusters build once
	// (Build) and pass it.
	Bin string
	// Settings are --set key=value for every node, after the harness's own
	// (listen addresses, auth.loopback_users=) so they can override them.
	Settings []string
	// NodeSettings returns more --set key=value for node n, given every node
	// of the run (their names and addresses are known before any starts):
	// where per-node cluster settings go, e.g. ClusterSettings.
	NodeSettings func(n *Node, all []*Node) []string
}

// Cluster is one run of the harness: a bridge, a namespace per node and a
// warren process in each. Its methods fail the test on error, so call them
// from the test's goroutine.
type Cluster struct {
	Nodes []*Node

	t      testing.TB
	id     string
	bridge string
	subnet netip.Prefix
	dir    string

	mu    sync.Mutex
	netem map[*Node]*netemState // nodes with Netem applied
}

// Start creates n namespaces on a new bridge and starts a warren in each,
// returning once every node has started. Everything is removed when the test
// ends (also when it fails), and leftovers of runs whose process died are
// removed first. Without root, network namespaces or the tools it needs,
// Start skips the test (fails it when WARREN_FAULTS_STRICT=1, as make
// test-faults sets).
func Start(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	Require(t)
	if n < 1 || n > 200 {
		t.Fatalf("fault harness: %d nodes: want 1 to 200", n)
	}
	if err := removeStale(); err != nil {
		t.Logf("fault harness: removing leftovers of earlier runs: %v", err)
	}
	id, err := newID()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "warren-faults-"+id+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := writeState(id, dir); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("fault harness: %v", err)
	}
	c := &Cluster{t: t, id: id, bridge: "wf" + id + "br", dir: dir, netem: map[*Node]*netemState{}}
	t.Cleanup(c.close)
	if c.subnet, err = pickSubnet(id); err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	bin := opts.Bin
	if bin == "" {
		bin = brokertest.BuildWarren(t)
	}
	for i := 1; i <= n; i++ {
		name := "n" + strconv.Itoa(i)
		c.Nodes = append(c.Nodes, &Node{
			Name:     name,
			IP:       nodeAddr(c.subnet, i),
			Netns:    nsPrefix + id + "-" + name,
			DataDir:  filepath.Join(dir, name, "data"),
			LogPath:  filepath.Join(dir, name+".log"),
			hostVeth: "wf" + id + "h" + strconv.Itoa(i),
			nsVeth:   "wf" + id + "n" + strconv.Itoa(i),
			bin:      bin,
			secret:   hex.EncodeToString(secret),
		})
	}
	if err := setupBridge(c.bridge, hostAddr(c.subnet)); err != nil {
		t.Fatalf("fault harness: %v", err)
	}
	if err := allowForward(id, c.bridge); err != nil {
		t.Fatalf("fault harness: %v", err)
	}
	for _, node := range c.Nodes {
		if err := setupNode(node, c.bridge); err != nil {
			t.Fatalf("fault harness: %v", err)
		}
		if err := os.MkdirAll(node.DataDir, 0o755); err != nil {
			t.Fatal(err)
		}
		node.settings = append(baseSettings(node), opts.Settings...)
		if opts.NodeSettings != nil {
			node.settings = append(node.settings, opts.NodeSettings(node, c.Nodes)...)
		}
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, node := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = node.start()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("fault harness: %v", err)
	}
	t.Logf("fault harness: run %s, %d nodes on %s (bridge %s), logs in %s", id, n, c.subnet, c.bridge, dir)
	return c
}

// baseSettings are the harness's settings for every node: its node name
// (warren@n1, ...), every listener on all of the namespace's addresses at the
// fixed ports, and guest allowed from other addresses than loopback (clients
// come over the bridge).
func baseSettings(n *Node) []string {
	return []string{
		"cluster.node_name=warren@" + n.Name,
		"amqp.listen=:" + strconv.Itoa(AMQPPort),
		"stream.listen=:" + strconv.Itoa(StreamPort),
		"http.listen=:" + strconv.Itoa(HTTPPort),
		"prometheus.listen=:" + strconv.Itoa(PrometheusPort),
		"cluster.listen=:" + strconv.Itoa(ClusterPort),
		"auth.loopback_users=",
	}
}

// Require skips the test when the harness cannot run here (Missing), or
// fails it when WARREN_FAULTS_STRICT=1 (make test-faults).
func Require(t testing.TB) {
	t.Helper()
	if why := Missing(); why != "" {
		if os.Getenv("WARREN_FAULTS_STRICT") == "1" {
			t.Fatalf("fault harness: %s", why)
		}
		t.Skipf("fault harness: %s", why)
	}
}

// ClusterSettings is an Options.NodeSettings that makes the nodes one
// cluster: each advertises its own cluster address, cluster.seeds lists every
// node's (a node may list itself), and they share the run's join secret.
// Without it the nodes are independent brokers.
func ClusterSettings(n *Node, all []*Node) []string {
	seeds := make([]string, len(all))
	for i, m := range all {
		seeds[i] = m.ClusterAddr()
	}
	return []string{
		"cluster.advertise=" + n.ClusterAddr(),
		"cluster.seeds=" + strings.Join(seeds, ","),
		"cluster.secret=" + n.secret,
	}
}

// Build compiles cmd/warren into dir once, for tests that start several
// clusters (TestMain); it returns the binary's path.
func Build(dir string) (string, error) {
	return build(dir)
}

// close stops every node and removes the run. On failure it logs the tail
// of every node's log first.
func (c *Cluster) close() {
	for _, n := range c.Nodes {
		if c.t.Failed() {
			c.t.Logf("fault harness: last lines of %s's log (%s):\n%s", n.Name, n.LogPath, n.logTail(40))
		}
		_ = n.stop(syscall.SIGKILL, 5*time.Second)
	}
	c.mu.Lock()
	for _, st := range c.netem {
		st.stop()
	}
	c.mu.Unlock()
	if err := teardown(c.id); err != nil {
		c.t.Errorf("fault harness: teardown of run %s: %v", c.id, err)
	}
}

func (c *Cluster) fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("fault harness: "+format, args...)
}

// Node returns the node named name ("n1").
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	c.fatalf("no node %q", name)
	return nil
}

// Running reports whether node n's process runs (a paused node runs; one
// that was killed, stopped or exited on its own does not).
func (c *Cluster) Running(n *Node) bool { return n.running() }

// Dir is the run's directory: the nodes' data directories and logs.
func (c *Cluster) Dir() string { return c.dir }

// String names the run for logs.
func (c *Cluster) String() string { return fmt.Sprintf("faults run %s (%s)", c.id, c.subnet) }
