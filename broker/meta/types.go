package meta

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"regexp"
	"sort"
)

// Vhost is a virtual host.
type Vhost struct {
	Name             string          `json:"name"`
	Description      string          `json:"description,omitempty"`
	Tags             []string        `json:"tags,omitempty"`
	DefaultQueueType string          `json:"default_queue_type,omitempty"`
	Storage          StorageSettings `json:"storage,omitempty"`
}

// StorageSettings are a vhost's storage policy; zero values mean the node default.
type StorageSettings struct {
	QueueVersion         int   `json:"queue-version,omitempty"`
	EmbedMessagesBelow   int   `json:"embed-messages-below,omitempty"`
	StreamReadAhead      *bool `json:"stream-read-ahead,omitempty"`
	StreamReadAheadLimit int   `json:"stream-read-ahead-limit,omitempty"`
}

// User is a broker user. PasswordHash is RabbitMQ's
// rabbit_password_hashing_sha256 format: base64 of a 4-byte salt followed by
// sha256(salt + password).
type User struct {
	Name             string   `json:"name"`
	PasswordHash     string   `json:"password_hash"`
	HashingAlgorithm string   `json:"hashing_algorithm"`
	Tags             []string `json:"tags"`
}

// HashPassword hashes a password the way RabbitMQ does by default.
func HashPassword(password string) (string, error) {
	salt := make([]byte, 4)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("meta: salt: %w", err)
	}
	return hashWithSalt(salt, password), nil
}

func hashWithSalt(salt []byte, password string) string {
	h := sha256.Sum256(append(append([]byte(nil), salt...), password...))
	return base64.StdEncoding.EncodeToString(append(append([]byte(nil), salt...), h[:]...))
}

// CheckPassword reports whether password matches the user's hash.
func (u User) CheckPassword(password string) bool {
	raw, err := base64.StdEncoding.DecodeString(u.PasswordHash)
	if err != nil || len(raw) != 4+sha256.Size {
		return false
	}
	want := hashWithSalt(raw[:4], password)
	return subtle.ConstantTimeCompare([]byte(want), []byte(u.PasswordHash)) == 1
}

// HasTag reports whether the user has tag.
func (u User) HasTag(tag string) bool {
	for _, t := range u.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// Permission is a user's access in a vhost: regular expressions over
// resource names, as RabbitMQ.
type Permission struct {
	User      string `json:"user"`
	Vhost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// Access is a kind of permission.
type Access int

// Access kinds.
const (
	Configure Access = iota
	Write
	Read
)

// CheckPermission applies RabbitMQ's rules: the pattern is a regular
// expression searched in the resource name (anchor it with ^...$ to match
// whole names); an empty or invalid pattern denies. The default exchange ("")
// is checked as "amq.default". It compiles the pattern on each call: on a hot
// path (every publish) compile once with CompilePermission.
func CheckPermission(p Permission, kind Access, resource string) bool {
	return CompilePermission(p).Check(kind, resource)
}

// CompiledPermission is a Permission with its patterns compiled. Its zero
// value denies everything; it is safe for concurrent use.
type CompiledPermission struct {
	re  [3]*regexp.Regexp // by Access; nil denies
	all [3]bool           // ".*": every name, no regexp run
}

// CompilePermission compiles p's three patterns.
func CompilePermission(p Permission) CompiledPermission {
	var c CompiledPermission
	for kind, pat := range [3]string{Configure: p.Configure, Write: p.Write, Read: p.Read} {
		switch pat {
		case "":
		case ".*":
			c.all[kind] = true
		default:
			if re, err := regexp.Compile(pat); err == nil {
				c.re[kind] = re
			}
		}
	}
	return c
}

// Check reports whether kind of access to resource is allowed.
func (c CompiledPermission) Check(kind Access, resource string) bool {
	if kind < Configure || kind > Read {
		return false
	}
	if c.all[kind] {
		return true
	}
	re := c.re[kind]
	if re == nil {
		return false
	}
	if resource == "" {
		resource = "amq.default"
	}
	return re.MatchString(resource)
}

// Policy is a RabbitMQ policy.
type Policy struct {
	Vhost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Priority   int            `json:"priority"`
	Definition map[string]any `json:"definition"`
}

// MatchPolicy returns the highest-priority policy whose pattern matches name
// and whose apply-to covers kind ("queue", "exchange", "stream", "quorum").
func MatchPolicy(policies []Policy, name string, kind string) (Policy, bool) {
	var best Policy
	found := false
	for _, p := range policies {
		if !appliesTo(p.ApplyTo, kind) {
			continue
		}
		re, err := regexp.Compile(p.Pattern)
		if err != nil || !re.MatchString(name) {
			continue
		}
		if !found || p.Priority > best.Priority || (p.Priority == best.Priority && p.Name < best.Name) {
			best, found = p, true
		}
	}
	return best, found
}

func appliesTo(applyTo, kind string) bool {
	switch applyTo {
	case "", "all":
		return true
	case "queues":
		return kind == "queue" || kind == "stream" || kind == "quorum"
	case "exchanges":
		return kind == "exchange"
	case "classic_queues":
		return kind == "queue"
	case "quorum_queues":
		return kind == "quorum"
	case "streams":
		return kind == "stream"
	}
	return false
}

// Exchange is an exchange (durable or not).
type Exchange struct {
	Vhost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

// Queue is a queue or stream (durable or not, exclusive ones too: every
// node routes to it) and where it lives.
type Queue struct {
	Vhost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Exclusive  bool           `json:"exclusive"`
	Arguments  map[string]any `json:"arguments"`
	// Node is the node that holds the queue: a classic queue's only node;
	// for a replicated type (quorum, stream) the node it was declared on.
	// Empty in records written before placement was recorded: the local
	// node's.
	Node string `json:"node,omitempty"`
	// Members and Leader are a replicated queue's Raft group (quorum queues
	// and replicated streams); empty for a classic queue.
	Members []string `json:"members,omitempty"`
	Leader  string   `json:"leader,omitempty"`
	// Owner is an exclusive queue's connection.
	Owner *QueueOwner `json:"owner,omitempty"`
}

// Binding is a binding (durable or not).
type Binding struct {
	Vhost           string         `json:"vhost"`
	Source          string         `json:"source"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}

func (b Binding) key() string {
	return b.Vhost + "\x00" + b.Source + "\x00" + b.DestinationType + "\x00" + b.Destination + "\x00" + b.RoutingKey + "\x00" + canonicalArgs(b.Arguments)
}

func canonicalArgs(m map[string]any) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%s=%v;", k, m[k])
	}
	return s
}
