package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// ctlClient talks to a node's HTTP API.
type ctlClient struct {
	base, user, pass string
	quiet            bool
	http             *http.Client
}

// say tells the user what a write command does, as rabbitmqctl does
// ("Adding vhost \"x\" ..."), unless --quiet.
func (c *ctlClient) say(cmd *cobra.Command, format string, args ...any) {
	if !c.quiet {
		fmt.Fprintf(cmd.OutOrStdout(), format+"\n", args...)
	}
}

// ctlKind is what `warren ctl list` can list: the HTTP API's path and the
// columns shown.
type ctlKind struct {
	name string
	cols []string
}

// ctlKinds are the kinds `warren ctl list` knows, in the order its usage
// names them.
func ctlKinds() []ctlKind {
	return []ctlKind{
		{"vhosts", []string{"name", "description", "default_queue_type"}},
		{"users", []string{"name", "tags"}},
		{"permissions", []string{"user", "vhost", "configure", "write", "read"}},
		{"queues", []string{"vhost", "name", "type", "durable", "messages", "messages_unacknowledged", "consumers"}},
		{"exchanges", []string{"vhost", "name", "type", "durable"}},
		{"bindings", []string{"vhost", "source", "destination", "destination_type", "routing_key"}},
		{"connections", []string{"name", "user", "vhost", "channels"}},
		{"channels", []string{"name", "user", "vhost", "consumer_count", "messages_unacknowledged"}},
		{"policies", []string{"vhost", "name", "pattern", "apply-to", "priority"}},
	}
}

// listKindArg accepts exactly one known kind; otherwise its error names
// them all, so a bare `warren ctl list` says what it can list.
func listKindArg(_ *cobra.Command, args []string) error {
	var names []string
	for _, k := range ctlKinds() {
		if len(args) == 1 && args[0] == k.name {
			return nil
		}
		names = append(names, k.name)
	}
	switch {
	case len(args) == 0:
		return fmt.Errorf("list what? Usage: warren ctl list KIND, where KIND is one of: %s", strings.Join(names, ", "))
	case len(args) > 1:
		return fmt.Errorf("list takes one KIND, got %d (%s); KIND is one of: %s", len(args), strings.Join(args, " "), strings.Join(names, ", "))
	}
	return fmt.Errorf("unknown kind %q; KIND is one of: %s", args[0], strings.Join(names, ", "))
}

func (c *ctlClient) do(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.SetBasicAuth(c.user, c.pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e struct{ Error, Reason string }
		if json.Unmarshal(data, &e) == nil && e.Reason != "" {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, e.Reason)
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil && len(data) > 0 {
		if w, ok := out.(io.Writer); ok {
			_, err := w.Write(data)
			return err
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode response: %w", method, path, err)
		}
	}
	return nil
}

func newCtlCmd() *cobra.Command {
	c := &ctlClient{http: &http.Client{Timeout: clusterOpTimeout}}
	cmd := &cobra.Command{
		Use:   "ctl",
		Short: "Administer a running node through its HTTP API",
	}
	cmd.PersistentFlags().StringVar(&c.base, "url", envOr("WARREN_URL", "http://localhost:15672"), "HTTP API base URL")
	cmd.PersistentFlags().StringVar(&c.user, "user", envOr("WARREN_USER", "guest"), "user name")
	cmd.PersistentFlags().StringVar(&c.pass, "password", envOr("WARREN_PASSWORD", "guest"), "password")
	cmd.PersistentFlags().BoolVarP(&c.quiet, "quiet", "q", false, "do not say what a write command does")

	var kindNames []string
	for _, k := range ctlKinds() {
		kindNames = append(kindNames, k.name)
	}
	list := &cobra.Command{
		Use:       "list KIND",
		Short:     "List " + strings.Join(kindNames, ", "),
		Args:      listKindArg,
		ValidArgs: kindNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			var rows []map[string]any
			if err := c.do(http.MethodGet, "/api/"+args[0], nil, &rows); err != nil {
				return err
			}
			for _, k := range ctlKinds() {
				if k.name == args[0] {
					return printTable(cmd.OutOrStdout(), k.cols, rows)
				}
			}
			return listKindArg(cmd, args)
		},
	}
	addVhost := &cobra.Command{
		Use:   "add-vhost NAME",
		Short: "Create a vhost",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.say(cmd, "Adding vhost %q ...", args[0])
			return c.do(http.MethodPut, "/api/vhosts/"+url.PathEscape(args[0]), map[string]any{}, nil)
		},
	}
	deleteVhost := &cobra.Command{
		Use:   "delete-vhost NAME",
		Short: "Delete a vhost and everything in it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.say(cmd, "Deleting vhost %q ...", args[0])
			return c.do(http.MethodDelete, "/api/vhosts/"+url.PathEscape(args[0]), nil, nil)
		},
	}
	var storage struct {
		queueVersion, embedBelow, readAheadLimit int
		readAhead                                string
		defaultQueueType                         string
	}
	setStorage := &cobra.Command{
		Use:   "set-vhost-storage VHOST",
		Short: "Change a vhost's storage policy at runtime (queue version, embed threshold, stream read-ahead)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/api/vhosts/" + url.PathEscape(args[0])
			var cur map[string]any
			if err := c.do(http.MethodGet, path, nil, &cur); err != nil {
				return err
			}
			st, _ := cur["storage"].(map[string]any)
			if st == nil {
				st = map[string]any{}
			}
			if storage.queueVersion != 0 {
				st["queue-version"] = storage.queueVersion
			}
			if storage.embedBelow != 0 {
				st["embed-messages-below"] = storage.embedBelow
			}
			if storage.readAheadLimit != 0 {
				st["stream-read-ahead-limit"] = storage.readAheadLimit
			}
			switch storage.readAhead {
			case "":
			case "on", "true":
				st["stream-read-ahead"] = true
			case "off", "false":
				st["stream-read-ahead"] = false
			default:
				return fmt.Errorf("--stream-read-ahead: want on or off, got %q", storage.readAhead)
			}
			body := map[string]any{"storage": st}
			for _, k := range []string{"description", "tags", "default_queue_type"} {
				if v, ok := cur[k]; ok {
					body[k] = v
				}
			}
			if storage.defaultQueueType != "" {
				body["default_queue_type"] = storage.defaultQueueType
			}
			c.say(cmd, "Setting the storage of vhost %q to %s ...", args[0], describeStorage(st, body["default_queue_type"]))
			return c.do(http.MethodPut, path, body, nil)
		},
	}
	setStorage.Flags().IntVar(&storage.queueVersion, "queue-version", 0, "classic queue storage version, 1 or 2")
	setStorage.Flags().IntVar(&storage.embedBelow, "embed-messages-below", 0, "bytes below which messages are embedded in queue files")
	setStorage.Flags().StringVar(&storage.readAhead, "stream-read-ahead", "", "on or off")
	setStorage.Flags().IntVar(&storage.readAheadLimit, "stream-read-ahead-limit", 0, "bytes read ahead after a small chunk")
	setStorage.Flags().StringVar(&storage.defaultQueueType, "default-queue-type", "", "classic, quorum or stream")

	var tags string
	addUser := &cobra.Command{
		Use:   "add-user NAME PASSWORD",
		Short: "Create or update a user",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.say(cmd, "Adding user %q ...", args[0])
			return c.do(http.MethodPut, "/api/users/"+url.PathEscape(args[0]), map[string]any{"password": args[1], "tags": tags}, nil)
		},
	}
	addUser.Flags().StringVar(&tags, "tags", "", "comma-separated tags, e.g. administrator")
	setPerms := &cobra.Command{
		Use:   "set-permissions VHOST USER CONFIGURE WRITE READ",
		Short: "Grant a user permissions in a vhost (regular expressions)",
		Args:  cobra.ExactArgs(5),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.say(cmd, "Setting permissions for user %q in vhost %q ...", args[1], args[0])
			return c.do(http.MethodPut, "/api/permissions/"+url.PathEscape(args[0])+"/"+url.PathEscape(args[1]),
				map[string]string{"configure": args[2], "write": args[3], "read": args[4]}, nil)
		},
	}
	export := &cobra.Command{
		Use:   "export-definitions [FILE]",
		Short: "Write the node's definitions (RabbitMQ JSON format) to FILE or stdout",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var buf bytes.Buffer
			if err := c.do(http.MethodGet, "/api/definitions", nil, &buf); err != nil {
				return err
			}
			if len(args) == 0 {
				_, err := cmd.OutOrStdout().Write(buf.Bytes())
				return err
			}
			c.say(cmd, "Exporting definitions in JSON to a file at %q ...", args[0])
			return os.WriteFile(args[0], buf.Bytes(), 0o600)
		},
	}
	imp := &cobra.Command{
		Use:   "import-definitions FILE",
		Short: "Import definitions (RabbitMQ JSON format)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			c.say(cmd, "Importing definitions in JSON from a file at %q ...", args[0])
			return c.do(http.MethodPost, "/api/definitions", json.RawMessage(data), nil)
		},
	}
	closeConn := &cobra.Command{
		Use:   "close-connection NAME",
		Short: "Close a client connection by name",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c.say(cmd, "Closing connection %q ...", args[0])
			return c.do(http.MethodDelete, "/api/connections/"+url.PathEscape(args[0]), nil, nil)
		},
	}
	cmd.AddCommand(list, addVhost, deleteVhost, setStorage, addUser, setPerms, export, imp, closeConn)
	cmd.AddCommand(clusterCommands(c)...)
	return cmd
}

// describeStorage writes a vhost's storage settings as key=value pairs,
// sorted.
func describeStorage(st map[string]any, defaultQueueType any) string {
	var parts []string
	for k, v := range st {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(parts)
	if defaultQueueType != nil && defaultQueueType != "" {
		parts = append(parts, fmt.Sprintf("default-queue-type=%v", defaultQueueType))
	}
	return strings.Join(parts, " ")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func printTable(w io.Writer, cols []string, rows []map[string]any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	sort.SliceStable(rows, func(i, j int) bool { return fmt.Sprint(rows[i]["name"]) < fmt.Sprint(rows[j]["name"]) })
	for _, r := range rows {
		vals := make([]string, len(cols))
		for i, c := range cols {
			if v, ok := r[c]; ok && v != nil {
				vals[i] = fmt.Sprint(v)
			}
		}
		fmt.Fprintln(tw, strings.Join(vals, "\t"))
	}
	return tw.Flush()
}
