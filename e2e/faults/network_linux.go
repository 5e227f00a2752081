//go:build linux

package faults

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Block drops every packet from node from to node to (one way: to still
// sends, and its packets reach from). The rule is in to's namespace, so
// established connections stall too.
func (c *Cluster) Block(from, to *Node) {
	c.t.Helper()
	if from == to {
		c.fatalf("Block %s from itself", from.Name)
	}
	if _, err := inNS(to.Netns, "iptables", "-w", "5", "-A", "INPUT", "-s", from.IP.String(), "-j", "DROP"); err != nil {
		c.fatalf("Block %s -> %s: %v", from.Name, to.Name, err)
	}
}

// Partition drops every packet between nodes a and b, both ways. Other
// nodes, and clients on the host, still reach both.
func (c *Cluster) Partition(a, b *Node) {
	c.t.Helper()
	c.Block(a, b)
	c.Block(b, a)
}

// Isolate partitions node n from every other node. Clients on the host still
// reach it (a minority node with its clients); LinkDown cuts it off from
// everything.
func (c *Cluster) Isolate(n *Node) {
	c.t.Helper()
	for _, m := range c.Nodes {
		if m != n {
			c.Partition(n, m)
		}
	}
}

// LinkDown takes node n's link to the bridge down: nothing reaches it and it
// reaches nothing, host included (a pulled cable; its addresses and
// connections stay, packets are lost until LinkUp).
func (c *Cluster) LinkDown(n *Node) {
	c.t.Helper()
	if _, err := run("ip", "link", "set", n.hostVeth, "down"); err != nil {
		c.fatalf("LinkDown %s: %v", n.Name, err)
	}
}

// LinkUp brings node n's link back.
func (c *Cluster) LinkUp(n *Node) {
	c.t.Helper()
	if _, err := run("ip", "link", "set", n.hostVeth, "up"); err != nil {
		c.fatalf("LinkUp %s: %v", n.Name, err)
	}
}

// Netem delays every packet node n sends by delay and drops each with
// probability lossPercent/100 (so its round trip with anyone grows by
// delay). It replaces an earlier Netem of n; Netem(n, 0, 0) or Heal removes
// it. With tc netem (sch_netem) when the kernel has it; on kernels without
// it, loss is an iptables statistic rule and delay a queue in this process
// (NFQUEUE) that holds each packet for delay, so the fault is the same.
func (c *Cluster) Netem(n *Node, delay time.Duration, lossPercent float64) {
	c.t.Helper()
	if delay < 0 || lossPercent < 0 || lossPercent > 100 {
		c.fatalf("Netem %s: delay %v, loss %v%%: want delay >= 0 and loss in [0, 100]", n.Name, delay, lossPercent)
	}
	if err := c.clearNetem(n); err != nil {
		c.fatalf("Netem %s: %v", n.Name, err)
	}
	if delay == 0 && lossPercent == 0 {
		return
	}
	st, err := c.applyNetem(n, delay, lossPercent)
	if err != nil {
		c.fatalf("Netem %s: %v", n.Name, err)
	}
	c.mu.Lock()
	c.netem[n] = st
	c.mu.Unlock()
}

// NetemDropped is how many packets node n's Netem loss has dropped so far.
func (c *Cluster) NetemDropped(n *Node) int64 {
	c.t.Helper()
	c.mu.Lock()
	st := c.netem[n]
	c.mu.Unlock()
	if st == nil {
		return 0
	}
	d, err := st.dropped()
	if err != nil {
		c.fatalf("NetemDropped %s: %v", n.Name, err)
	}
	return d
}

// Heal undoes every network fault: partitions and blocks, Netem, links
// down. Process faults (Pause, Kill9) are undone by Resume and Restart.
func (c *Cluster) Heal() {
	c.t.Helper()
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, c.clearNetem(n))
		for _, chain := range []string{"INPUT", "OUTPUT"} {
			if _, err := inNS(n.Netns, "iptables", "-w", "5", "-F", chain); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := run("ip", "link", "set", n.hostVeth, "up"); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.fatalf("Heal: %v", err)
	}
}

// netemState is a Netem in force on one node.
type netemState struct {
	node    *Node
	tc      bool     // sch_netem on the node's veth
	lossArg []string // the iptables loss rule, when not tc
	delayer *delayer // the NFQUEUE delayer, when not tc and delay > 0
}

// applyNetem installs the fault: tc netem if the kernel has it, else the
// iptables/NFQUEUE equivalent.
func (c *Cluster) applyNetem(n *Node, delay time.Duration, loss float64) (*netemState, error) {
	args := []string{"qdisc", "add", "dev", n.nsVeth, "root", "netem"}
	if delay > 0 {
		args = append(args, "delay", strconv.FormatInt(delay.Microseconds(), 10)+"us")
	}
	if loss > 0 {
		args = append(args, "loss", strconv.FormatFloat(loss, 'f', -1, 64)+"%")
	}
	_, err := inNS(n.Netns, "tc", args...)
	if err == nil {
		return &netemState{node: n, tc: true}, nil
	}
	if !strings.Contains(err.Error(), "qdisc kind is unknown") {
		return nil, err
	}
	// The delayer's NFQUEUE rule first, then the loss rule inserted above
	// it: a packet the delayer lets go is accepted and skips the rules
	// after its own, so the drop must come before.
	st := &netemState{node: n}
	if delay > 0 {
		d, err := startDelayer(n, delay)
		if err != nil {
			return nil, err
		}
		st.delayer = d
	}
	if loss > 0 {
		st.lossArg = []string{"OUTPUT", "-o", n.nsVeth, "-m", "statistic", "--mode", "random",
			"--probability", strconv.FormatFloat(loss/100, 'f', -1, 64), "-j", "DROP"}
		if _, err := inNS(n.Netns, "iptables", append([]string{"-w", "5", "-I"}, st.lossArg...)...); err != nil {
			st.stop()
			return nil, err
		}
	}
	return st, nil
}

// dropped reads the loss counter: netem's drops from tc -s, or the packet
// count of the iptables statistic rule.
func (st *netemState) dropped() (int64, error) {
	if st.tc {
		out, err := inNS(st.node.Netns, "tc", "-s", "qdisc", "show", "dev", st.node.nsVeth)
		if err != nil {
			return 0, err
		}
		// " Sent 1234 bytes 12 pkt (dropped 3, overlimits 0 requeues 0)"
		_, after, ok := strings.Cut(out, "(dropped ")
		if !ok {
			return 0, fmt.Errorf("no drop count in %q", out)
		}
		num, _, _ := strings.Cut(after, ",")
		return strconv.ParseInt(num, 10, 64)
	}
	if st.lossArg == nil {
		return 0, nil
	}
	out, err := inNS(st.node.Netns, "iptables", "-w", "5", "-L", "OUTPUT", "-v", "-x", "-n")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] == "DROP" && strings.Contains(line, "statistic") {
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no loss rule in %q", out)
}

// stop removes what applyNetem installed outside tc (the delayer's rules and
// queue, the loss rule).
func (st *netemState) stop() {
	if st.delayer != nil {
		st.delayer.stop()
		st.delayer = nil
	}
	if st.lossArg != nil {
		_, _ = inNS(st.node.Netns, "iptables", append([]string{"-w", "5", "-D"}, st.lossArg...)...)
		st.lossArg = nil
	}
}

// clearNetem removes node n's Netem, if any.
func (c *Cluster) clearNetem(n *Node) error {
	c.mu.Lock()
	st := c.netem[n]
	delete(c.netem, n)
	c.mu.Unlock()
	if st == nil {
		return nil
	}
	if st.tc {
		_, err := inNS(n.Netns, "tc", "qdisc", "del", "dev", n.nsVeth, "root")
		return err
	}
	st.stop()
	return nil
}
