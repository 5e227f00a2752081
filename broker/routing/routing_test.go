package routing

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
)

func mustDeclare(t *testing.T, tb *Table, name string, kind Kind) {
	t.Helper()
	if _, _, err := tb.DeclareExchange(Exchange{Name: name, Kind: kind}); err != nil {
		t.Fatalf("declare %s: %v", name, err)
	}
}

func mustBind(t *testing.T, tb *Table, b Binding) {
	t.Helper()
	if err := tb.Bind(b); err != nil {
		t.Fatalf("bind %+v: %v", b, err)
	}
}

func routeSorted(t *testing.T, tb *Table, x, key string, h map[string]any) string {
	t.Helper()
	got, err := tb.Route(x, key, h, nil)
	if err != nil {
		t.Fatalf("route %s %s: %v", x, key, err)
	}
	sort.Strings(got)
	return strings.Join(got, ",")
}

func TestTopicPatterns(t *testing.T) {
	tests := []struct {
		pattern string
		match   []string
		noMatch []string
	}{
		{"#", []string{"", "a", "a.b.c"}, nil},
		{"a.#", []string{"a", "a.b", "a.b.c"}, []string{"b", "ab"}},
		{"a.#.b", []string{"a.b", "a.x.b", "a.x.y.b"}, []string{"a", "a.b.c", "b"}},
		{"*.*", []string{"a.b", "x.y"}, []string{"a", "a.b.c"}},
		{"*", []string{"a"}, []string{"a.b", ""}},
		{"", []string{""}, []string{"a", "."}},
		{"*.*", []string{"."}, nil},
		{"a.*", []string{"a."}, []string{"a"}},
		{"#.a.#", []string{"a", "x.a", "a.x", "x.y.a.z"}, []string{"x", "b.c"}},
		{"*.#", []string{"a", "a.b.c"}, []string{""}},
		{"#.*", []string{"a", "a.b"}, []string{""}},
		{"a.*.c", []string{"a.b.c", "a..c"}, []string{"a.c", "a.b.b.c"}},
		{"#.c", []string{"c", "a.c", "a.b.c"}, []string{"c.a"}},
		{"a", []string{"a"}, []string{"a.a", "b"}},
		{"#.#", []string{"", "a", "a.b"}, nil},
		{"a..b", []string{"a..b"}, []string{"a.b"}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			tb := NewTable()
			tb.AddQueue("q")
			mustDeclare(t, tb, "t", Topic)
			mustBind(t, tb, Binding{Source: "t", Destination: "q", Key: tt.pattern})
			for _, k := range tt.match {
				if got := routeSorted(t, tb, "t", k, nil); got != "q" {
					t.Errorf("pattern %q key %q: routed to %q, want q", tt.pattern, k, got)
				}
			}
			for _, k := range tt.noMatch {
				if got := routeSorted(t, tb, "t", k, nil); got != "" {
					t.Errorf("pattern %q key %q: routed to %q, want nothing", tt.pattern, k, got)
				}
			}
		})
	}
}

func TestHeadersMatching(t *testing.T) {
	tests := []struct {
		name    string
		args    map[string]any
		headers map[string]any
		want    bool
	}{
		{"all matches", map[string]any{"x-match": "all", "a": "1", "b": int32(2)}, map[string]any{"a": "1", "b": int64(2)}, true},
		{"all misses one", map[string]any{"x-match": "all", "a": "1", "b": "2"}, map[string]any{"a": "1"}, false},
		{"default is all", map[string]any{"a": "1", "b": "2"}, map[string]any{"a": "1"}, false},
		{"any matches one", map[string]any{"x-match": "any", "a": "1", "b": "2"}, map[string]any{"b": "2"}, true},
		{"any none", map[string]any{"x-match": "any", "a": "1"}, map[string]any{"a": "2"}, false},
		{"x- keys ignored", map[string]any{"x-match": "all", "x-foo": "1"}, map[string]any{}, true},
		{"all-with-x compares x- keys", map[string]any{"x-match": "all-with-x", "x-foo": "1"}, map[string]any{}, false},
		{"void value matches presence", map[string]any{"x-match": "all", "a": nil}, map[string]any{"a": "anything"}, true},
		{"numbers compare by value across widths", map[string]any{"x-match": "all", "n": uint8(5)}, map[string]any{"n": 5.0}, true},
		{"different numbers miss", map[string]any{"x-match": "all", "n": int16(5)}, map[string]any{"n": int64(6)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := headersMatch(tt.args, tt.headers); got != tt.want {
				t.Fatalf("headersMatch = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRouteKindsExchangeChainsAndAlternate(t *testing.T) {
	tb := NewTable()
	for _, q := range []string{"q1", "q2", "q3", "unrouted"} {
		tb.AddQueue(q)
	}
	mustDeclare(t, tb, "d", Direct)
	mustDeclare(t, tb, "f", Fanout)
	mustDeclare(t, tb, "loop", Fanout)
	if _, _, err := tb.DeclareExchange(Exchange{Name: "withae", Kind: Direct, AlternateExchange: "ae"}); err != nil {
		t.Fatal(err)
	}
	mustDeclare(t, tb, "ae", Fanout)
	mustBind(t, tb, Binding{Source: "d", Destination: "q1", Key: "k"})
	mustBind(t, tb, Binding{Source: "d", Destination: "q1", Key: "k"}) // idempotent
	mustBind(t, tb, Binding{Source: "d", Destination: "f", ToExchange: true, Key: "k"})
	mustBind(t, tb, Binding{Source: "f", Destination: "q1"})
	mustBind(t, tb, Binding{Source: "f", Destination: "q2"})
	mustBind(t, tb, Binding{Source: "f", Destination: "loop", ToExchange: true})
	mustBind(t, tb, Binding{Source: "loop", Destination: "f", ToExchange: true})
	mustBind(t, tb, Binding{Source: "loop", Destination: "q3"})
	mustBind(t, tb, Binding{Source: "withae", Destination: "q1", Key: "hit"})
	mustBind(t, tb, Binding{Source: "ae", Destination: "unrouted"})
	tests := []struct {
		x, key, want string
	}{
		{"d", "k", "q1,q2,q3"},
		{"d", "other", ""},
		{"", "q2", "q2"},
		{"", "missing", ""},
		{"withae", "hit", "q1"},
		{"withae", "miss", "unrouted"},
	}
	for _, tt := range tests {
		if got := routeSorted(t, tb, tt.x, tt.key, nil); got != tt.want {
			t.Errorf("route %q %q = %q, want %q", tt.x, tt.key, got, tt.want)
		}
	}
	if _, err := tb.Route("nope", "k", nil, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("route to missing exchange: %v, want ErrNotFound", err)
	}
}

func TestDeclareDeleteAndAutoDelete(t *testing.T) {
	tb := NewTable()
	tb.AddQueue("q")
	if _, created, err := tb.DeclareExchange(Exchange{Name: "x", Kind: Direct, Durable: true}); err != nil || !created {
		t.Fatalf("declare: created=%v err=%v", created, err)
	}
	if _, created, err := tb.DeclareExchange(Exchange{Name: "x", Kind: Direct, Durable: true}); err != nil || created {
		t.Fatalf("redeclare: created=%v err=%v", created, err)
	}
	if _, _, err := tb.DeclareExchange(Exchange{Name: "x", Kind: Fanout, Durable: true}); !errors.Is(err, ErrInequivalent) {
		t.Fatalf("inequivalent redeclare: %v", err)
	}
	mustBind(t, tb, Binding{Source: "x", Destination: "q", Key: "k"})
	if err := tb.DeleteExchange("x", true); !errors.Is(err, ErrInUse) {
		t.Fatalf("delete if-unused with a binding: %v", err)
	}
	if _, _, err := tb.DeclareExchange(Exchange{Name: "ad", Kind: Fanout, AutoDelete: true}); err != nil {
		t.Fatal(err)
	}
	mustBind(t, tb, Binding{Source: "ad", Destination: "q"})
	removed, auto := tb.RemoveQueue("q")
	if len(removed) != 2 || len(auto) != 1 || auto[0] != "ad" {
		t.Fatalf("RemoveQueue: removed %v auto-deleted %v", removed, auto)
	}
	if _, ok := tb.Exchange("ad"); ok {
		t.Fatal("auto-delete exchange survived losing its last binding")
	}
	if err := tb.DeleteExchange("x", true); err != nil {
		t.Fatalf("delete unused: %v", err)
	}
	if len(tb.Bindings()) != 0 {
		t.Fatalf("bindings left: %v", tb.Bindings())
	}
}

func TestConcurrentRouteDuringBind(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, "t", Topic)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 500; i++ {
			q := fmt.Sprintf("q%d", i)
			tb.AddQueue(q)
			_ = tb.Bind(Binding{Source: "t", Destination: q, Key: "a.#"})
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]string, 0, 512)
		for i := 0; i < 2000; i++ {
			if _, err := tb.Route("t", "a.b", nil, buf[:0]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	got, _ := tb.Route("t", "a.b", nil, nil)
	if len(got) != 500 {
		t.Fatalf("routed to %d queues, want 500", len(got))
	}
}

func BenchmarkRouteDirect(b *testing.B) {
	tb := NewTable()
	if _, _, err := tb.DeclareExchange(Exchange{Name: "d", Kind: Direct}); err != nil {
		b.Fatal(err)
	}
	bs := make([]Binding, 0, 1000)
	for i := 0; i < 1000; i++ {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		bs = append(bs, Binding{Source: "d", Destination: q, Key: q})
	}
	if err := tb.BindAll(bs); err != nil {
		b.Fatal(err)
	}
	buf := make([]string, 0, 4)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _ = tb.Route("d", "q500", nil, buf[:0])
	}
}

func BenchmarkRouteTopic(b *testing.B) {
	tb := NewTable()
	if _, _, err := tb.DeclareExchange(Exchange{Name: "t", Kind: Topic}); err != nil {
		b.Fatal(err)
	}
	bs := make([]Binding, 0, 10000)
	for i := 0; i < 10000; i++ {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		bs = append(bs, Binding{Source: "t", Destination: q, Key: fmt.Sprintf("region%d.*.orders", i%100)})
	}
	if err := tb.BindAll(bs); err != nil {
		b.Fatal(err)
	}
	buf := make([]string, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _ = tb.Route("t", "region42.eu.orders", nil, buf[:0])
	}
}
