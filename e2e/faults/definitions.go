package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
)

// FetchDefinitions returns a node's definitions export (GET /api/definitions
// at baseURL as guest).
func FetchDefinitions(ctx context.Context, client *http.Client, baseURL string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/api/definitions", nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/api/definitions: %s: %s", baseURL, resp.Status, body)
	}
	return body, nil
}

// CompareDefinitions checks that definitions exports are the same, ignoring
// the order of the items in each list (users, vhosts, queues, ...). names
// label the documents in the error. The error lists, per document that
// differs from the first, each item it has that the first lacks (+) and each
// the first has that it lacks (-).
func CompareDefinitions(names []string, docs [][]byte) error {
	if len(names) != len(docs) {
		return fmt.Errorf("compare definitions: %d names for %d documents", len(names), len(docs))
	}
	if len(docs) < 2 {
		return nil
	}
	sets := make([]map[string][]string, len(docs))
	for i, d := range docs {
		s, err := itemSets(d)
		if err != nil {
			return fmt.Errorf("definitions of %s: %w", names[i], err)
		}
		sets[i] = s
	}
	var diffs []string
	for i := 1; i < len(sets); i++ {
		for _, key := range keysOf(sets[0], sets[i]) {
			plus, minus := diff(sets[i][key], sets[0][key])
			for _, it := range plus {
				diffs = append(diffs, fmt.Sprintf("%s %s: + %s", names[i], key, it))
			}
			for _, it := range minus {
				diffs = append(diffs, fmt.Sprintf("%s %s: - %s", names[i], key, it))
			}
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("definitions differ from %s's:\n%s", names[0], strings.Join(diffs, "\n"))
	}
	return nil
}

// itemSets turns a definitions document into, per top-level key, its items
// as canonical JSON (object keys sorted) in sorted order. A top-level value
// that is not a list is one item.
func itemSets(doc []byte) (map[string][]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for key, raw := range top {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		list, ok := v.([]any)
		if !ok {
			list = []any{v}
		}
		items := make([]string, 0, len(list))
		for _, it := range list {
			b, err := json.Marshal(it) // maps marshal with sorted keys
			if err != nil {
				return nil, err
			}
			items = append(items, string(b))
		}
		sort.Strings(items)
		out[key] = items
	}
	return out, nil
}

// keysOf returns the keys of a and b, sorted.
func keysOf(a, b map[string][]string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range []map[string][]string{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// diff returns the items of a not in b and of b not in a (both sorted,
// duplicates counted).
func diff(a, b []string) (onlyA, onlyB []string) {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			i++
			j++
		case a[i] < b[j]:
			onlyA = append(onlyA, a[i])
			i++
		default:
			onlyB = append(onlyB, b[j])
			j++
		}
	}
	return append(onlyA, a[i:]...), append(onlyB, b[j:]...)
}
