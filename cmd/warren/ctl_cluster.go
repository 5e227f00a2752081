package main

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"
)

// clusterCommands are `warren ctl cluster-status`, `join`, `forget-node`,
// `leave`, `drain` and `decommission`: the node's cluster through its HTTP
// API.
func clusterCommands(c *ctlClient) []*cobra.Command {
	status := &cobra.Command{
		Use:   "cluster-status",
		Short: "Show the cluster's members, which are running, and the metadata leader",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var st struct {
				Node           string           `json:"node"`
				MetadataLeader string           `json:"metadata_leader"`
				Nodes          []map[string]any `json:"nodes"`
			}
			if err := c.do(http.MethodGet, "/api/cluster/status", nil, &st); err != nil {
				return err
			}
			leader := st.MetadataLeader
			if leader == "" {
				leader = "(none: an election is running, or a majority of the members is not reachable)"
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Cluster status of node %s\nMetadata leader: %s\n\n", st.Node, leader)
			for _, n := range st.Nodes {
				state := "running"
				if n["running"] != true {
					state = "not running"
				}
				if n["being_drained"] == true {
					state += ", drained"
				}
				n["state"] = state
				if n["voter"] == true {
					n["role"] = "voter"
				} else {
					n["role"] = "joining"
				}
			}
			return printTable(w, []string{"name", "address", "role", "state"}, st.Nodes)
		},
	}
	op := func(use, short, say, method, path string) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				c.say(cmd, "%s", say)
				return c.do(method, path, nil, nil)
			},
		}
	}
	forget := &cobra.Command{
		Use:   "forget-node NAME",
		Short: "Remove a stopped node from the cluster for good (it must be reset before it joins again)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.say(cmd, "Removing node %s from the cluster ...", args[0])
			return c.do(http.MethodDelete, "/api/cluster/nodes/"+url.PathEscape(args[0]), nil, nil)
		},
	}
	join := &cobra.Command{
		Use:   "join ADDRESS",
		Short: "Make this node, alone and with only its defaults, a member of the cluster of the node at ADDRESS (its cluster listener, host:port)",
		Long: "Make this node a member of another cluster (as rabbitmqctl join_cluster), without a restart.\n" +
			"ADDRESS is the cluster listener (cluster.advertise, host:port) of any node of that cluster.\n" +
			"The node must be alone in a cluster of its own and hold nothing besides the default vhost, user\n" +
			"and permission: RabbitMQ resets a joining node and loses its data; Warren refuses instead.\n" +
			"Its client connections are closed; it then has the cluster's definitions. The membership\n" +
			"survives restarts.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.say(cmd, "Joining the cluster of the node at %s ...", args[0])
			return c.do(http.MethodPost, "/api/cluster/join", map[string]string{"address": args[0]}, nil)
		},
	}
	cmds := []*cobra.Command{
		status, join, forget,
		op("leave", "Take the node out of its cluster (leaderships move first); stop it afterwards",
			"Leaving the cluster ...", http.MethodPost, "/api/cluster/leave"),
		op("drain", "Move every leadership off the node, then stop taking clients (maintenance, restart)",
			"Draining the node: moving leaderships away, then closing client listeners ...", http.MethodPost, "/api/cluster/drain"),
		op("decommission", "Drain the node, move its memberships to other nodes, then leave the cluster",
			"Decommissioning the node ...", http.MethodPost, "/api/cluster/decommission"),
	}
	// --delay: a Kubernetes preStop hook runs `drain --delay 10s`, so the
	// proxies stop routing new clients to the terminating pod before its
	// listeners close (the operator's StatefulSet does).
	drain := cmds[4]
	delay := drain.Flags().Duration("delay", 0, "wait this long before draining (in a preStop hook: until the pod is out of the Service's endpoints)")
	run := drain.RunE
	drain.RunE = func(cmd *cobra.Command, args []string) error {
		select {
		case <-time.After(*delay):
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		}
		// The only member drains too (a single replica's preStop hook):
		// say so, since nothing moves and its clients have nowhere to go.
		var st struct {
			Nodes []struct {
				Voter bool `json:"voter"`
			} `json:"nodes"`
		}
		if c.do(http.MethodGet, "/api/cluster/status", nil, &st) == nil && len(st.Nodes) == 1 {
			c.say(cmd, "Draining the node, the only member of its cluster: no leadership to move; closing its client listeners (clients reconnect once it is back) ...")
			return c.do(http.MethodPost, "/api/cluster/drain", nil, nil)
		}
		return run(cmd, args)
	}
	return cmds
}

// clusterOpTimeout bounds a membership change (the server bounds it at
// two minutes).
const clusterOpTimeout = 150 * time.Second
