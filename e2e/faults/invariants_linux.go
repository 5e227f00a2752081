//go:build linux

package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest/eventually"
)

// LeaderWithin is the bound: every group has a leader within 10 s
// of healing.
const LeaderWithin = 10 * time.Second

// DefinitionsOf returns the definitions export of each node (fetched from
// the host), in node order.
func (c *Cluster) DefinitionsOf(ctx context.Context, nodes ...*Node) ([]string, [][]byte, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	names := make([]string, len(nodes))
	docs := make([][]byte, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
		d, err := FetchDefinitions(ctx, client, n.HTTPURL())
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		docs[i] = d
	}
	return names, docs, nil
}

// SameDefinitions returns nil when every given node (every node of c when
// none is given) exports the same definitions, ignoring order; else an error
// listing the differences.
func (c *Cluster) SameDefinitions(ctx context.Context, nodes ...*Node) error {
	if len(nodes) == 0 {
		nodes = c.Nodes
	}
	names, docs, err := c.DefinitionsOf(ctx, nodes...)
	if err != nil {
		return err
	}
	return CompareDefinitions(names, docs)
}

// WaitSameDefinitions fails the test unless every node exports the same
// definitions within timeout (replication takes a moment after healing).
func (c *Cluster) WaitSameDefinitions(timeout time.Duration) {
	c.t.Helper()
	eventually.Succeeds(c.t, timeout, "the same definitions on every node", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.SameDefinitions(ctx)
	})
}

// LeaderProbe asks one node whether every Raft group it hosts has a leader
// it knows of. The cluster status a node exposes (warren ctl cluster-status,
// its HTTP counterpart) is what a probe reads.
type LeaderProbe func(n *Node) (bool, error)

// WaitLeaders fails the test unless probe answers true for every running
// node within LeaderWithin.
func (c *Cluster) WaitLeaders(probe LeaderProbe) {
	c.t.Helper()
	eventually.Succeeds(c.t, LeaderWithin, "every group has a leader", func() error {
		var errs []error
		for _, n := range c.Nodes {
			if !n.running() {
				continue
			}
			ok, err := probe(n)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
			case !ok:
				errs = append(errs, fmt.Errorf("%s: a group without a leader", n.Name))
			}
		}
		return errors.Join(errs...)
	})
}

// DialAMQP opens an AMQP connection as guest to node to from node from's
// namespace (nil: from the host); timeout bounds connect and handshake.
func (c *Cluster) DialAMQP(from, to *Node, timeout time.Duration) (*amqp.Connection, error) {
	return DialAMQP(from, to.AMQPURL(), timeout)
}

// CheckNoLoss drains queue on node n (from the host) and fails the test if
// any message in confirmed is not received.
func (c *Cluster) CheckNoLoss(n *Node, queue string, confirmed map[string]bool) DrainReport {
	c.t.Helper()
	conn, err := DialAMQP(nil, n.AMQPURL(), 10*time.Second)
	if err != nil {
		c.fatalf("CheckNoLoss: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Drain(ctx, conn, queue, confirmed, 3*time.Second)
	if err != nil {
		c.fatalf("CheckNoLoss on %s: %v (%v)", n.Name, err, rep)
	}
	if len(rep.Lost) > 0 {
		c.t.Errorf("confirmed messages lost on %s queue %s: %v", n.Name, queue, rep)
	}
	return rep
}

// DialAny returns a PublisherConfig.Dial that connects from node from
// (nil: the host) to the nodes to in turn, one further at each call, so a
// publisher whose node fails moves on to the next.
func (c *Cluster) DialAny(from *Node, timeout time.Duration, to ...*Node) func() (*amqp.Connection, error) {
	if len(to) == 0 {
		to = c.Nodes
	}
	var mu sync.Mutex
	next := 0
	return func() (*amqp.Connection, error) {
		mu.Lock()
		n := to[next%len(to)]
		next++
		mu.Unlock()
		conn, err := DialAMQP(from, n.AMQPURL(), timeout)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
		return conn, nil
	}
}
