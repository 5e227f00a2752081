package routing

import (
	"fmt"
	"reflect"
	"strings"
)

// maxHops bounds exchange-to-exchange traversal.
const maxHops = 64

// Route appends the queues a message with key and headers reaches from
// exchange to dst, deduplicated. ErrNotFound when the exchange is missing.
func (t *Table) Route(exchange, key string, headers map[string]any, dst []string) ([]string, error) {
	s := t.snap.Load()
	start := len(dst)
	if exchange == "" {
		if _, ok := s.queues[key]; ok {
			dst = append(dst, key)
		}
		return dst, nil
	}
	e, ok := s.exchanges[exchange]
	if !ok {
		return dst, fmt.Errorf("%w: exchange %q", ErrNotFound, exchange)
	}
	// Fast path: one exchange, no exchange-to-exchange hops.
	var visited []string
	dst = s.routeFrom(e, key, headers, dst, start, &visited, 0)
	return dst, nil
}

func (s *snapshot) routeFrom(e *exchangeState, key string, headers map[string]any, dst []string, start int, visited *[]string, depth int) []string {
	if depth > maxHops {
		return dst
	}
	for _, v := range *visited {
		if v == e.x.Name {
			return dst
		}
	}
	*visited = append(*visited, e.x.Name)
	before := len(dst)
	matched := false
	visit := func(d dest) {
		matched = true
		if d.toExchange {
			if next, ok := s.exchanges[d.name]; ok {
				dst = s.routeFrom(next, key, headers, dst, start, visited, depth+1)
			}
			return
		}
		if _, ok := s.queues[d.name]; !ok {
			return
		}
		for _, have := range dst[start:] {
			if have == d.name {
				return
			}
		}
		dst = append(dst, d.name)
	}
	switch e.x.Kind {
	case Direct:
		for _, d := range e.direct[key] {
			visit(d)
		}
	case Fanout:
		for _, d := range e.fanout {
			visit(d)
		}
	case Topic:
		e.topic.match(splitWords(key), visit)
	case Headers:
		for _, b := range e.bindings {
			if headersMatch(b.Args, headers) {
				visit(dest{b.Destination, b.ToExchange})
			}
		}
	}
	if len(dst) == before && !matched && e.x.AlternateExchange != "" {
		if ae, ok := s.exchanges[e.x.AlternateExchange]; ok {
			dst = s.routeFrom(ae, key, headers, dst, start, visited, depth+1)
		}
	}
	return dst
}

func splitWords(key string) []string { return strings.Split(key, ".") }

// topicNode is a trie over binding-key words; "*" and "#" are children too.
type topicNode struct {
	children map[string]*topicNode
	dests    []dest
}

func (n *topicNode) insert(words []string, d dest) {
	for _, w := range words {
		if n.children == nil {
			n.children = map[string]*topicNode{}
		}
		c, ok := n.children[w]
		if !ok {
			c = &topicNode{}
			n.children[w] = c
		}
		n = c
	}
	n.dests = append(n.dests, d)
}

// match calls fn for every destination whose pattern matches words. A
// destination bound by several patterns may be reported more than once; the
// caller deduplicates.
func (n *topicNode) match(words []string, fn func(dest)) {
	if len(words) == 0 {
		for _, d := range n.dests {
			fn(d)
		}
		// "#" matches zero words.
		if h := n.children["#"]; h != nil {
			h.match(nil, fn)
		}
		return
	}
	if n.children == nil {
		return
	}
	if c := n.children[words[0]]; c != nil {
		c.match(words[1:], fn)
	}
	if c := n.children["*"]; c != nil {
		c.match(words[1:], fn)
	}
	if h := n.children["#"]; h != nil {
		// "#" swallows zero or more words.
		for i := 0; i <= len(words); i++ {
			h.match(words[i:], fn)
		}
	}
}

// headersMatch implements the headers exchange: x-match all (default) or
// any; "-with-x" variants also compare keys starting with "x-".
func headersMatch(bindArgs, headers map[string]any) bool {
	mode, _ := bindArgs["x-match"].(string)
	if mode == "" {
		mode = "all"
	}
	withX := strings.HasSuffix(mode, "-with-x")
	anyMode := strings.HasPrefix(mode, "any")
	for k, want := range bindArgs {
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		got, ok := headers[k]
		match := ok && (want == nil || valuesEqual(want, got))
		if anyMode && match {
			return true
		}
		if !anyMode && !match {
			return false
		}
	}
	if anyMode {
		return false
	}
	return true
}

func valuesEqual(a, b any) bool {
	ai, aok := asInt(a)
	bi, bok := asInt(b)
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
	}
	return reflect.DeepEqual(a, b)
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	}
	return 0, false
}
