package routing

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/warrenmq/warren/broker/message"
)

const (
	// maxHops bounds exchange-to-exchange traversal depth.
	maxHops = 64
	// dedupLinear is how many destinations are deduplicated by a linear
	// scan before a set is built.
	dedupLinear = 16
	// maxStackWords is how many routing-key words are split without
	// allocating.
	maxStackWords = 16
)

// router is one Route call's state; it lives on the caller's stack.
type router struct {
	s       *snapshot
	key     string
	headers map[string]any
	dst     []string
	start   int
	seen    map[string]struct{} // built once dst grows past dedupLinear
	visited [8]*exchangeState
	nvis    int
	more    []*exchangeState // visited beyond the array
}

// Route appends the queues a message with key and headers reaches from
// exchange to dst, deduplicated, following exchange-to-exchange bindings and
// alternate exchanges. ErrNotFound when the exchange is missing. The default
// exchange ("") routes key to the queue of that name when AddQueue made it
// known. Route takes no lock and, for direct, fanout and topic exchanges with
// few destinations, does not allocate when dst has capacity.
func (t *Table) Route(exchange, key string, headers map[string]any, dst []string) ([]string, error) {
	s := t.snap.Load()
	if exchange == "" {
		if t.HasQueue(key) {
			dst = append(dst, key)
		}
		return dst, nil
	}
	e, ok := s.exchanges[exchange]
	if !ok {
		return dst, fmt.Errorf("%w: exchange %q", ErrNotFound, exchange)
	}
	r := router{s: s, key: key, headers: headers, dst: dst, start: len(dst)}
	r.route(e, 0)
	return r.dst, nil
}

// HasQueue reports whether AddQueue made name known (and RemoveQueue has not
// forgotten it).
func (t *Table) HasQueue(name string) bool {
	_, ok := t.queues.Load(name)
	return ok
}

func (r *router) markVisited(e *exchangeState) bool {
	for _, v := range r.visited[:r.nvis] {
		if v == e {
			return false
		}
	}
	for _, v := range r.more {
		if v == e {
			return false
		}
	}
	if r.nvis < len(r.visited) {
		r.visited[r.nvis] = e
		r.nvis++
	} else {
		r.more = append(r.more, e)
	}
	return true
}

func (r *router) route(e *exchangeState, depth int) {
	if depth > maxHops || !r.markVisited(e) {
		return
	}
	matched := false
	switch e.x.Kind {
	case Direct:
		ds := e.direct[r.key]
		matched = len(ds) > 0
		for _, d := range ds {
			r.deliver(d, depth)
		}
	case Fanout:
		matched = len(e.fanout) > 0
		for _, d := range e.fanout {
			r.deliver(d, depth)
		}
	case Topic:
		// The words stay on this stack frame (storing them in r would move
		// r to the heap).
		var buf [maxStackWords]string
		matched = r.topic(e.topic, splitKey(r.key, buf[:0]), depth)
	case Headers:
		for i := range e.headers {
			hb := &e.headers[i]
			if hb.match(r.headers) {
				matched = true
				r.deliver(hb.d, depth)
			}
		}
	}
	if !matched && e.x.AlternateExchange != "" {
		if ae, ok := r.s.exchanges[e.x.AlternateExchange]; ok {
			r.route(ae, depth+1)
		}
	}
}

// deliver adds a queue (deduplicated) or follows an exchange binding.
func (r *router) deliver(d dest, depth int) {
	if d.toExchange {
		if next, ok := r.s.exchanges[d.name]; ok {
			r.route(next, depth+1)
		}
		return
	}
	if r.seen != nil {
		if _, dup := r.seen[d.name]; dup {
			return
		}
		r.seen[d.name] = struct{}{}
		r.dst = append(r.dst, d.name)
		return
	}
	got := r.dst[r.start:]
	for _, have := range got {
		if have == d.name {
			return
		}
	}
	r.dst = append(r.dst, d.name)
	if len(got)+1 > dedupLinear {
		r.seen = make(map[string]struct{}, 2*dedupLinear)
		for _, n := range r.dst[r.start:] {
			r.seen[n] = struct{}{}
		}
	}
}

// splitKey splits a routing key into words as RabbitMQ does: "" is zero
// words, otherwise every '.' separates (so "a..b" has an empty middle word).
func splitKey(key string, buf []string) []string {
	if key == "" {
		return buf[:0]
	}
	for {
		i := strings.IndexByte(key, '.')
		if i < 0 {
			return append(buf, key)
		}
		buf = append(buf, key[:i])
		key = key[i+1:]
	}
}

// topicNode is a trie over binding-key words; "*" and "#" have their own
// edges so matching never compares words against wildcards.
type topicNode struct {
	children map[string]*topicNode
	star     *topicNode
	hash     *topicNode
	dests    []dest
}

func (n *topicNode) insert(words []string, d dest) {
	for _, w := range words {
		var next **topicNode
		switch w {
		case "*":
			next = &n.star
		case "#":
			next = &n.hash
		default:
			if n.children == nil {
				n.children = map[string]*topicNode{}
			}
			c, ok := n.children[w]
			if !ok {
				c = &topicNode{}
				n.children[w] = c
			}
			n = c
			continue
		}
		if *next == nil {
			*next = &topicNode{}
		}
		n = *next
	}
	n.dests = append(n.dests, d)
}

// topic delivers every destination whose pattern matches words and reports
// whether any did. A destination reached by several patterns is offered more
// than once; deliver deduplicates.
func (r *router) topic(n *topicNode, words []string, depth int) bool {
	matched := false
	if n.hash != nil {
		// "#" swallows zero or more words.
		for i := 0; i <= len(words); i++ {
			if r.topic(n.hash, words[i:], depth) {
				matched = true
			}
		}
	}
	if len(words) == 0 {
		for _, d := range n.dests {
			matched = true
			r.deliver(d, depth)
		}
		return matched
	}
	if c := n.children[words[0]]; c != nil && r.topic(c, words[1:], depth) {
		matched = true
	}
	if n.star != nil && r.topic(n.star, words[1:], depth) {
		matched = true
	}
	return matched
}

// headersBinding is a headers-exchange binding with its x-match mode parsed.
type headersBinding struct {
	d     dest
	any   bool
	withX bool
	args  map[string]any
}

func newHeadersBinding(b Binding) headersBinding {
	mode, _ := b.Args["x-match"].(string)
	return headersBinding{
		d:     dest{b.Destination, b.ToExchange},
		any:   strings.HasPrefix(mode, "any"),
		withX: strings.HasSuffix(mode, "-with-x"),
		args:  b.Args,
	}
}

// match implements the headers exchange: x-match all (default) or any; the
// "-with-x" variants also compare arguments whose names start with "x-",
// which are otherwise ignored. A void (nil) argument matches any value of a
// present header.
func (hb *headersBinding) match(headers map[string]any) bool {
	for k, want := range hb.args {
		if k == "x-match" || (!hb.withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		got, ok := headers[k]
		m := ok && (want == nil || valuesEqual(want, got))
		if hb.any && m {
			return true
		}
		if !hb.any && !m {
			return false
		}
	}
	return !hb.any
}

func headersMatch(bindArgs, headers map[string]any) bool {
	hb := newHeadersBinding(Binding{Args: bindArgs})
	return hb.match(headers)
}

func valuesEqual(a, b any) bool {
	ai, aok := message.FieldInt(a)
	bi, bok := message.FieldInt(b)
	if aok && bok {
		return ai == bi
	}
	if as, ok := a.(string); ok {
		switch bs := b.(type) {
		case string:
			return as == bs
		case []byte:
			return as == string(bs)
		}
		return false
	}
	return reflect.DeepEqual(a, b)
}
