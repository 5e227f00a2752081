package routing

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
)

func TestHeadersExchangeRoute(t *testing.T) {
	tb := NewTable()
	for _, q := range []string{"all", "any", "withx"} {
		tb.AddQueue(q)
	}
	mustBind(t, tb, Binding{Source: "amq.headers", Destination: "all", Args: map[string]any{"x-match": "all", "format": "pdf", "type": "report"}})
	mustBind(t, tb, Binding{Source: "amq.headers", Destination: "any", Args: map[string]any{"x-match": "any", "format": "pdf", "type": "log"}})
	mustBind(t, tb, Binding{Source: "amq.match", Destination: "withx", Args: map[string]any{"x-match": "any-with-x", "x-tenant": "a"}})
	tests := []struct {
		x       string
		headers map[string]any
		want    string
	}{
		{"amq.headers", map[string]any{"format": "pdf", "type": "report"}, "all,any"},
		{"amq.headers", map[string]any{"format": "pdf"}, "any"},
		{"amq.headers", map[string]any{"type": "log"}, "any"},
		{"amq.headers", map[string]any{"format": []byte("pdf"), "type": "report"}, "all,any"},
		{"amq.headers", nil, ""},
		{"amq.match", map[string]any{"x-tenant": "a"}, "withx"},
		{"amq.match", map[string]any{"x-tenant": "b"}, ""},
	}
	for _, tt := range tests {
		if got := routeSorted(t, tb, tt.x, "ignored", tt.headers); got != tt.want {
			t.Errorf("route %s %v = %q, want %q", tt.x, tt.headers, got, tt.want)
		}
	}
}

func TestDefaultExchangeKnowsQueues(t *testing.T) {
	tb := NewTable()
	if tb.HasQueue("q") {
		t.Fatal("unknown queue reported")
	}
	tb.AddQueue("q")
	if got := routeSorted(t, tb, "", "q", nil); got != "q" {
		t.Fatalf("default exchange routed to %q", got)
	}
	tb.RemoveQueue("q")
	if got := routeSorted(t, tb, "", "q", nil); got != "" {
		t.Fatalf("default exchange routed to removed queue: %q", got)
	}
}

func TestDedupManyPaths(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, "f1", Fanout)
	mustDeclare(t, tb, "f2", Fanout)
	mustBind(t, tb, Binding{Source: "f1", Destination: "f2", ToExchange: true})
	var want []string
	for i := 0; i < 40; i++ {
		q := fmt.Sprintf("q%02d", i)
		tb.AddQueue(q)
		want = append(want, q)
		mustBind(t, tb, Binding{Source: "f1", Destination: q})
		mustBind(t, tb, Binding{Source: "f2", Destination: q})
	}
	// The caller's entries already in dst are kept and not deduplicated against.
	got, err := tb.Route("f1", "", nil, []string{"q00"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 41 || got[0] != "q00" {
		t.Fatalf("routed to %d names (%v), want the prefix plus 40", len(got), got)
	}
	rest := append([]string(nil), got[1:]...)
	sort.Strings(rest)
	if strings.Join(rest, ",") != strings.Join(want, ",") {
		t.Fatalf("routed to %v, want %v", rest, want)
	}
}

func TestAlternateExchangeChainAndCycle(t *testing.T) {
	tb := NewTable()
	tb.AddQueue("last")
	for _, x := range []Exchange{
		{Name: "a", Kind: Direct, AlternateExchange: "b"},
		{Name: "b", Kind: Topic, AlternateExchange: "a"}, // cycle back to a
		{Name: "c", Kind: Direct, AlternateExchange: "missing"},
	} {
		if _, _, err := tb.DeclareExchange(x); err != nil {
			t.Fatal(err)
		}
	}
	if got := routeSorted(t, tb, "a", "k", nil); got != "" {
		t.Fatalf("AE cycle routed to %q", got)
	}
	mustBind(t, tb, Binding{Source: "b", Destination: "last", Key: "#"})
	if got := routeSorted(t, tb, "a", "k", nil); got != "last" {
		t.Fatalf("AE chain routed to %q, want last", got)
	}
	if got := routeSorted(t, tb, "c", "k", nil); got != "" {
		t.Fatalf("missing AE routed to %q", got)
	}
	// A binding match to an exchange that routes nowhere still counts as
	// routed by a, so a's alternate is not used (RabbitMQ's rule).
	mustDeclare(t, tb, "empty", Fanout)
	mustBind(t, tb, Binding{Source: "a", Destination: "empty", ToExchange: true, Key: "k"})
	if got := routeSorted(t, tb, "a", "k", nil); got != "" {
		t.Fatalf("matched binding still used the AE: %q", got)
	}
}

func TestAutoDeleteCascade(t *testing.T) {
	tb := NewTable()
	tb.AddQueue("q")
	for _, x := range []Exchange{
		{Name: "up", Kind: Fanout, AutoDelete: true},
		{Name: "down", Kind: Fanout, AutoDelete: true},
		{Name: "keep", Kind: Fanout},
	} {
		if _, _, err := tb.DeclareExchange(x); err != nil {
			t.Fatal(err)
		}
	}
	mustBind(t, tb, Binding{Source: "up", Destination: "down", ToExchange: true})
	mustBind(t, tb, Binding{Source: "down", Destination: "q"})
	mustBind(t, tb, Binding{Source: "keep", Destination: "q"})
	removed, auto := tb.RemoveQueue("q")
	if len(removed) != 3 || strings.Join(auto, ",") != "down,up" {
		t.Fatalf("RemoveQueue: removed %v, auto-deleted %v; want 3 bindings and down,up", removed, auto)
	}
	if _, ok := tb.Exchange("keep"); !ok {
		t.Fatal("non-auto-delete exchange deleted")
	}
	if bs := tb.Bindings(); len(bs) != 0 {
		t.Fatalf("bindings left: %v", bs)
	}

	if _, _, err := tb.DeclareExchange(Exchange{Name: "ad", Kind: Direct, AutoDelete: true}); err != nil {
		t.Fatal(err)
	}
	tb.AddQueue("q")
	mustBind(t, tb, Binding{Source: "ad", Destination: "q", Key: "1"})
	mustBind(t, tb, Binding{Source: "ad", Destination: "q", Key: "2"})
	if auto, err := tb.UnbindAutoDelete(Binding{Source: "ad", Destination: "q", Key: "1"}); err != nil || len(auto) != 0 {
		t.Fatalf("first unbind: auto %v err %v", auto, err)
	}
	if err := tb.Unbind(Binding{Source: "ad", Destination: "q", Key: "nope"}); err != nil {
		t.Fatalf("unbind absent binding: %v", err)
	}
	if auto, err := tb.UnbindAutoDelete(Binding{Source: "ad", Destination: "q", Key: "2"}); err != nil || strings.Join(auto, ",") != "ad" {
		t.Fatalf("last unbind: auto %v err %v", auto, err)
	}
	if err := tb.Unbind(Binding{Source: "ad", Destination: "q", Key: "2"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unbind from deleted exchange: %v", err)
	}

	mustBind(t, tb, Binding{Source: "keep", Destination: "q"})
	if _, _, err := tb.DeclareExchange(Exchange{Name: "src", Kind: Fanout, AutoDelete: true}); err != nil {
		t.Fatal(err)
	}
	mustBind(t, tb, Binding{Source: "src", Destination: "keep", ToExchange: true})
	removed, auto, err := tb.DeleteExchangeCascade("keep", false)
	if err != nil || len(removed) != 2 || strings.Join(auto, ",") != "src" {
		t.Fatalf("DeleteExchangeCascade: removed %v auto %v err %v", removed, auto, err)
	}
	if err := tb.DeleteExchange("keep", false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete deleted exchange: %v", err)
	}
}

func TestBindAllAndKinds(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, "d", Direct)
	tb.AddQueue("q")
	err := tb.BindAll([]Binding{
		{Source: "d", Destination: "q", Key: "a"},
		{Source: "d", Destination: "q", Key: "a"},
		{Source: "missing", Destination: "q"},
		{Source: "d", Destination: "nox", ToExchange: true},
		{Source: "d", Destination: "q", Key: "b"},
	})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("BindAll error = %v, want ErrNotFound", err)
	}
	if bs := tb.Bindings(); len(bs) != 2 {
		t.Fatalf("bindings %v, want the two valid distinct ones", bs)
	}
	if _, err := ParseKind("x-consistent-hash"); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("ParseKind unknown: %v", err)
	}
	for _, k := range []Kind{Direct, Fanout, Topic, Headers} {
		if got, err := ParseKind(k.String()); err != nil || got != k {
			t.Fatalf("ParseKind(%q) = %v, %v", k.String(), got, err)
		}
	}
}

func TestRouteDoesNotAllocate(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, "d", Direct)
	mustDeclare(t, tb, "f", Fanout)
	mustDeclare(t, tb, "t", Topic)
	for i := 0; i < 4; i++ {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		mustBind(t, tb, Binding{Source: "d", Destination: q, Key: "k"})
		mustBind(t, tb, Binding{Source: "f", Destination: q})
		mustBind(t, tb, Binding{Source: "t", Destination: q, Key: "a.*.c"})
	}
	buf := make([]string, 0, 8)
	for _, x := range []string{"d", "f", "t"} {
		key := "k"
		if x == "t" {
			key = "a.b.c"
		}
		var n int
		allocs := testing.AllocsPerRun(100, func() {
			out, _ := tb.Route(x, key, nil, buf[:0])
			n = len(out)
		})
		if n != 4 {
			t.Errorf("Route(%s) reached %d queues, want 4", x, n)
		}
		if allocs != 0 {
			t.Errorf("Route(%s) allocates %.0f times per call", x, allocs)
		}
	}
}

func TestRedeclareComparesArgumentsByValue(t *testing.T) {
	tb := NewTable()
	stored := Exchange{Name: "x", Kind: Topic, Durable: true, Args: map[string]any{"n": int64(5), "ae": "alt", "l": []any{int64(1)}}}
	if _, _, err := tb.DeclareExchange(stored); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args map[string]any
		ok   bool
	}{
		{map[string]any{"n": int32(5), "ae": []byte("alt"), "l": []any{int8(1)}}, true},
		{map[string]any{"n": int32(6), "ae": "alt", "l": []any{int64(1)}}, false},
		{map[string]any{"n": int64(5), "ae": "alt"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		_, created, err := tb.DeclareExchange(Exchange{Name: "x", Kind: Topic, Durable: true, Args: tt.args})
		if created || (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInequivalent)) {
			t.Errorf("redeclare with %v: created=%v err=%v, want ok=%v", tt.args, created, err, tt.ok)
		}
	}
	if _, _, err := tb.DeclareExchange(Exchange{Name: "empty", Kind: Direct, Args: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.DeclareExchange(Exchange{Name: "empty", Kind: Direct}); err != nil {
		t.Errorf("nil and empty args differ: %v", err)
	}
}
