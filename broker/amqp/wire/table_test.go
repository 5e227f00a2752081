package wire

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

func TestTableEveryType(t *testing.T) {
	ts := time.Unix(1700000000, 0).UTC()
	in := Table{
		"bool":      true,
		"false":     false,
		"int8":      int8(-8),
		"uint8":     uint8(200),
		"int16":     int16(-1600),
		"uint16":    uint16(60000),
		"int32":     int32(-320000),
		"uint32":    uint32(4000000000),
		"int64":     int64(-1 << 40),
		"float32":   float32(1.5),
		"float64":   float64(-2.25),
		"decimal":   Decimal{Scale: 2, Value: -12345},
		"string":    "héllo",
		"bytes":     []byte{0, 1, 2, 0xff},
		"timestamp": ts,
		"void":      nil,
		"array":     []any{int64(1), "two", true, []any{uint8(3)}, Table{"in": "array"}},
		"table":     Table{"nested": Table{"deeper": int32(7)}},
	}
	b := AppendTable(nil, in)
	got, n, err := DecodeTable(b)
	if err != nil {
		t.Fatalf("DecodeTable: %v", err)
	}
	if n != len(b) {
		t.Fatalf("consumed %d of %d bytes", n, len(b))
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, in)
	}
	if again := AppendTable(nil, got); !bytes.Equal(again, b) {
		t.Fatalf("re-encoding differs")
	}
}

// TestTableGolden checks RabbitMQ's type letters byte by byte.
func TestTableGolden(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want []byte // type letter and value
	}{
		{"bool", true, []byte{'t', 1}},
		{"int8", int8(-1), []byte{'b', 0xff}},
		{"uint8", uint8(7), []byte{'B', 7}},
		{"int16", int16(-2), []byte{'s', 0xff, 0xfe}},
		{"uint16", uint16(0x1234), []byte{'u', 0x12, 0x34}},
		{"int32", int32(-3), []byte{'I', 0xff, 0xff, 0xff, 0xfd}},
		{"uint32", uint32(0x01020304), []byte{'i', 1, 2, 3, 4}},
		{"int64", int64(5), []byte{'l', 0, 0, 0, 0, 0, 0, 0, 5}},
		{"float32", float32(1), []byte{'f', 0x3f, 0x80, 0, 0}},
		{"float64", float64(1), []byte{'d', 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}},
		{"decimal", Decimal{Scale: 3, Value: 10}, []byte{'D', 3, 0, 0, 0, 10}},
		{"string", "ab", []byte{'S', 0, 0, 0, 2, 'a', 'b'}},
		{"bytes", []byte{9}, []byte{'x', 0, 0, 0, 1, 9}},
		{"timestamp", time.Unix(258, 0).UTC(), []byte{'T', 0, 0, 0, 0, 0, 0, 1, 2}},
		{"void", nil, []byte{'V'}},
		{"array", []any{uint8(1)}, []byte{'A', 0, 0, 0, 2, 'B', 1}},
		{"table", Table{"a": uint8(1)}, []byte{'F', 0, 0, 0, 4, 1, 'a', 'B', 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := append([]byte{0, 0, 0, byte(2 + len(tt.want)), 1, 'k'}, tt.want...)
			got := AppendTable(nil, Table{"k": tt.v})
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendTable:\n got % x\nwant % x", got, want)
			}
			tab, _, err := DecodeTable(want)
			if err != nil {
				t.Fatalf("DecodeTable: %v", err)
			}
			if !reflect.DeepEqual(tab["k"], tt.v) {
				t.Fatalf("decoded %#v, want %#v", tab["k"], tt.v)
			}
		})
	}
}

func TestTableEncodeConveniences(t *testing.T) {
	b := AppendTable(nil, Table{
		"int":   42,
		"map":   map[string]any{"x": "y"},
		"strs":  []string{"a", "b"},
		"other": struct{}{},
	})
	got, _, err := DecodeTable(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Table{"int": int64(42), "map": Table{"x": "y"}, "strs": []any{"a", "b"}, "other": nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

func TestTableSortedKeys(t *testing.T) {
	a := AppendTable(nil, Table{"b": "2", "a": "1", "c": "3"})
	want := []byte{0, 0, 0, 24, 1, 'a', 'S', 0, 0, 0, 1, '1', 1, 'b', 'S', 0, 0, 0, 1, '2', 1, 'c', 'S', 0, 0, 0, 1, '3'}
	if !bytes.Equal(a, want) {
		t.Fatalf("got % x\nwant % x", a, want)
	}
	if got := AppendTable(nil, nil); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
		t.Fatalf("nil table = % x", got)
	}
}

func nestTables(depth int) Table {
	t := Table{"leaf": true}
	for i := 0; i < depth; i++ {
		t = Table{"t": t}
	}
	return t
}

func nestedTableBytes(depth int) []byte {
	// depth levels of {"t": F {...}} around an empty table.
	b := []byte{0, 0, 0, 0}
	for i := 0; i < depth; i++ {
		inner := b
		b = []byte{0, 0, 0, 0, 1, 't', 'F'}
		b = append(b, inner...)
		n := len(b) - 4
		b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	}
	return b
}

func TestTableNestingBound(t *testing.T) {
	if _, _, err := DecodeTable(nestedTableBytes(MaxNestingDepth - 1)); err != nil {
		t.Fatalf("depth %d rejected: %v", MaxNestingDepth-1, err)
	}
	if _, _, err := DecodeTable(nestedTableBytes(MaxNestingDepth)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("depth %d: err = %v, want ErrMalformed", MaxNestingDepth, err)
	}
	// A cyclic table encodes (void past the bound) instead of recursing forever.
	cyc := Table{}
	cyc["self"] = cyc
	if _, _, err := DecodeTable(AppendTable(nil, cyc)); err != nil {
		t.Fatalf("cyclic table encoding does not decode: %v", err)
	}
	// So does an over-deep one, and decodes within the bound.
	if _, _, err := DecodeTable(AppendTable(nil, nestTables(2*MaxNestingDepth))); err != nil {
		t.Fatalf("deep table: %v", err)
	}
}

func TestDecodeTableErrors(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
	}{
		{"no length", []byte{0, 0}},
		{"length beyond input", []byte{0, 0, 0, 5, 1, 'k'}},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}},
		{"key beyond table", []byte{0, 0, 0, 2, 5, 'k'}},
		{"missing type", []byte{0, 0, 0, 2, 1, 'k'}},
		{"unknown type", []byte{0, 0, 0, 3, 1, 'k', '?'}},
		{"truncated int", []byte{0, 0, 0, 4, 1, 'k', 'I', 0}},
		{"string beyond table", []byte{0, 0, 0, 8, 1, 'k', 'S', 0, 0, 0, 9, 'a', 0, 0}},
		{"huge array", []byte{0, 0, 0, 7, 1, 'k', 'A', 0xff, 0xff, 0xff, 0xff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tab, _, err := DecodeTable(tt.b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeTable = %v, %v; want ErrMalformed", tab, err)
			}
		})
	}
}

func TestTableNaN(t *testing.T) {
	b := AppendTable(nil, Table{"nan": math.NaN()})
	got, _, err := DecodeTable(b)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := got["nan"].(float64); !ok || !math.IsNaN(f) {
		t.Fatalf("got %#v", got["nan"])
	}
}
