package meta

import (
	"context"
	"fmt"
	"strings"
)

// Definitions is RabbitMQ's definitions document (export/import), with its
// JSON keys.
type Definitions struct {
	RabbitVersion   string           `json:"rabbit_version,omitempty"`
	RabbitMQVersion string           `json:"rabbitmq_version,omitempty"`
	ProductName     string           `json:"product_name,omitempty"`
	ProductVersion  string           `json:"product_version,omitempty"`
	Users           []DefUser        `json:"users,omitempty"`
	Vhosts          []DefVhost       `json:"vhosts,omitempty"`
	Permissions     []Permission     `json:"permissions,omitempty"`
	TopicPerms      []map[string]any `json:"topic_permissions,omitempty"`
	Parameters      []map[string]any `json:"parameters,omitempty"`
	GlobalParams    []map[string]any `json:"global_parameters,omitempty"`
	Policies        []Policy         `json:"policies,omitempty"`
	Queues          []DefQueue       `json:"queues,omitempty"`
	Exchanges       []DefExchange    `json:"exchanges,omitempty"`
	Bindings        []Binding        `json:"bindings,omitempty"`
}

// DefUser is a user in a definitions document; tags may be a list or a
// comma-separated string (older RabbitMQ versions).
type DefUser struct {
	Name             string         `json:"name"`
	PasswordHash     string         `json:"password_hash"`
	HashingAlgorithm string         `json:"hashing_algorithm"`
	Tags             any            `json:"tags"`
	Limits           map[string]any `json:"limits,omitempty"`
}

// DefVhost is a vhost in a definitions document.
type DefVhost struct {
	Name             string          `json:"name"`
	Description      string          `json:"description,omitempty"`
	Tags             []string        `json:"tags,omitempty"`
	DefaultQueueType string          `json:"default_queue_type,omitempty"`
	Metadata         map[string]any  `json:"metadata,omitempty"`
	Storage          StorageSettings `json:"storage,omitempty"`
}

// DefQueue is a queue in a definitions document.
type DefQueue struct {
	Name       string         `json:"name"`
	Vhost      string         `json:"vhost"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
	Type       string         `json:"type,omitempty"`
}

// DefExchange is an exchange in a definitions document.
type DefExchange struct {
	Name       string         `json:"name"`
	Vhost      string         `json:"vhost"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

// Export returns the store's definitions; vhost "" exports every vhost.
func Export(s Store, vhost string) Definitions {
	d := Definitions{ProductName: "Warren"}
	in := func(v string) bool { return vhost == "" || v == vhost }
	if vhost == "" {
		for _, u := range s.Users() {
			tags := u.Tags
			if tags == nil {
				tags = []string{}
			}
			d.Users = append(d.Users, DefUser{Name: u.Name, PasswordHash: u.PasswordHash, HashingAlgorithm: u.HashingAlgorithm, Tags: tags, Limits: map[string]any{}})
		}
	}
	for _, v := range s.Vhosts() {
		if !in(v.Name) {
			continue
		}
		d.Vhosts = append(d.Vhosts, DefVhost{Name: v.Name, Description: v.Description, Tags: v.Tags, DefaultQueueType: v.DefaultQueueType, Storage: v.Storage,
			Metadata: map[string]any{"description": v.Description, "tags": v.Tags, "default_queue_type": v.DefaultQueueType}})
		d.Policies = append(d.Policies, s.Policies(v.Name)...)
		// Only what outlives a restart: durable exchanges, durable
		// queues no connection owns, and bindings between them.
		transient := map[string]bool{} // "queue\x00name" or "exchange\x00name"
		for _, q := range s.Queues(v.Name) {
			if !q.Durable || q.Exclusive {
				transient[key2("queue", q.Name)] = true
				continue
			}
			d.Queues = append(d.Queues, DefQueue{Name: q.Name, Vhost: q.Vhost, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: q.Arguments, Type: q.Type})
		}
		for _, e := range s.Exchanges(v.Name) {
			if !e.Durable {
				transient[key2("exchange", e.Name)] = true
				continue
			}
			d.Exchanges = append(d.Exchanges, DefExchange{Name: e.Name, Vhost: e.Vhost, Type: e.Type, Durable: e.Durable, AutoDelete: e.AutoDelete, Internal: e.Internal, Arguments: e.Arguments})
		}
		for _, b := range s.Bindings(v.Name) {
			if !transient[key2("exchange", b.Source)] && !transient[key2(b.DestinationType, b.Destination)] {
				d.Bindings = append(d.Bindings, b)
			}
		}
	}
	for _, p := range s.Permissions() {
		if in(p.Vhost) {
			d.Permissions = append(d.Permissions, p)
		}
	}
	return d
}

// ImportAccess imports users, vhosts, permissions and policies (the parts
// that live only in the metadata store). Queues, exchanges and bindings are
// declared by the caller through the running vhosts.
func ImportAccess(ctx context.Context, s Store, d Definitions) error {
	for _, u := range d.Users {
		algo := u.HashingAlgorithm
		if algo == "" {
			algo = "rabbit_password_hashing_sha256"
		}
		if algo != "rabbit_password_hashing_sha256" {
			return fmt.Errorf("%w: user '%s': unsupported hashing_algorithm '%s'", ErrInvalid, u.Name, algo)
		}
		if err := s.PutUser(ctx, User{Name: u.Name, PasswordHash: u.PasswordHash, HashingAlgorithm: algo, Tags: tagList(u.Tags)}); err != nil {
			return fmt.Errorf("import user '%s': %w", u.Name, err)
		}
	}
	for _, v := range d.Vhosts {
		mv := Vhost{Name: v.Name, Description: v.Description, Tags: v.Tags, DefaultQueueType: v.DefaultQueueType, Storage: v.Storage}
		if md := v.Metadata; md != nil {
			if s, ok := md["description"].(string); ok && mv.Description == "" {
				mv.Description = s
			}
			if s, ok := md["default_queue_type"].(string); ok && mv.DefaultQueueType == "" {
				mv.DefaultQueueType = s
			}
		}
		if err := s.PutVhost(ctx, mv); err != nil {
			return fmt.Errorf("import vhost '%s': %w", v.Name, err)
		}
	}
	for _, p := range d.Permissions {
		if err := s.PutPermission(ctx, p); err != nil {
			return fmt.Errorf("import permission of '%s' in '%s': %w", p.User, p.Vhost, err)
		}
	}
	for _, p := range d.Policies {
		if p.ApplyTo == "" {
			p.ApplyTo = "all"
		}
		if err := s.PutPolicy(ctx, p); err != nil {
			return fmt.Errorf("import policy '%s': %w", p.Name, err)
		}
	}
	return nil
}

func tagList(v any) []string {
	switch t := v.(type) {
	case []string:
		return t
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	case string:
		var out []string
		start := 0
		for i := 0; i <= len(t); i++ {
			if i == len(t) || t[i] == ',' {
				if p := trimSpace(t[start:i]); p != "" {
					out = append(out, p)
				}
				start = i + 1
			}
		}
		return out
	}
	return nil
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// Import loads a whole definitions document into the store: what
// ImportAccess loads, then the durable queues, exchanges (the built-in ""
// and amq.* ones skipped) and bindings as metadata records. Use it on a
// store no vhost is running from yet (at boot, or offline); a running
// broker declares queues, exchanges and bindings through its vhosts instead.
func Import(ctx context.Context, s Store, d Definitions) error {
	if err := ImportAccess(ctx, s, d); err != nil {
		return err
	}
	for _, x := range d.Exchanges {
		if x.Name == "" || strings.HasPrefix(x.Name, "amq.") {
			continue
		}
		e := Exchange{Vhost: x.Vhost, Name: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: x.Arguments}
		if err := s.PutExchange(ctx, e); err != nil {
			return fmt.Errorf("import exchange '%s' in '%s': %w", x.Name, x.Vhost, err)
		}
	}
	for _, q := range d.Queues {
		typ := q.Type
		if typ == "" {
			typ, _ = q.Arguments["x-queue-type"].(string)
		}
		if typ == "" {
			typ = "classic"
		}
		mq := Queue{Vhost: q.Vhost, Name: q.Name, Type: typ, Durable: q.Durable, AutoDelete: q.AutoDelete, Arguments: q.Arguments}
		if err := s.PutQueue(ctx, mq); err != nil {
			return fmt.Errorf("import queue '%s' in '%s': %w", q.Name, q.Vhost, err)
		}
	}
	for _, b := range d.Bindings {
		if b.DestinationType == "" {
			b.DestinationType = "queue"
		}
		if err := s.PutBinding(ctx, b); err != nil {
			return fmt.Errorf("import binding '%s' -> '%s' in '%s': %w", b.Source, b.Destination, b.Vhost, err)
		}
	}
	return nil
}
