// Command gen generates the AMQP 0.9.1 method codec of package wire from
// the specification XML (amqp0-9-1.stripped.extended.xml).
//
// Usage:
//
//	go run ./internal/gen -spec spec/amqp0-9-1.stripped.extended.xml -out spec_gen.go
//
// For every constant it emits a Go constant (frame-method -> FrameMethod,
// not-found -> NotFound); for every class a ClassXxx id; for every method a
// struct named Class+Method in CamelCase whose fields follow the XML field
// names, with ClassID, MethodID, Name, HasContent and Append methods, a
// decoder, and the DecodeMethod dispatch table. Consecutive bit fields pack
// into one octet, least significant bit first.
package main

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"strings"
)

type spec struct {
	Constants []constant `xml:"constant"`
	Domains   []domain   `xml:"domain"`
	Classes   []class    `xml:"class"`
}

type constant struct {
	Name  string `xml:"name,attr"`
	Value int    `xml:"value,attr"`
	Class string `xml:"class,attr"`
}

type domain struct {
	Name string `xml:"name,attr"`
	Type string `xml:"type,attr"`
}

type class struct {
	Name    string   `xml:"name,attr"`
	Index   int      `xml:"index,attr"`
	Methods []method `xml:"method"`
}

type method struct {
	Name    string  `xml:"name,attr"`
	Index   int     `xml:"index,attr"`
	Content bool    `xml:"content,attr"`
	Sync    bool    `xml:"synchronous,attr"`
	Fields  []field `xml:"field"`
}

type field struct {
	Name     string `xml:"name,attr"`
	Domain   string `xml:"domain,attr"`
	Type     string `xml:"type,attr"`
	Reserved bool   `xml:"reserved,attr"`
}

// goTypes maps AMQP primitive types to Go types.
var goTypes = map[string]string{
	"bit":       "bool",
	"octet":     "uint8",
	"short":     "uint16",
	"long":      "uint32",
	"longlong":  "uint64",
	"shortstr":  "string",
	"longstr":   "string",
	"timestamp": "uint64",
	"table":     "Table",
}

// camel turns "routing-key" into "RoutingKey".
func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '_' || r == ' ' }) {
		b.WriteString(strings.ToUpper(part[:1]))
		b.WriteString(part[1:])
	}
	return b.String()
}

type generator struct {
	buf     bytes.Buffer
	domains map[string]string
}

func (g *generator) p(format string, args ...any) {
	fmt.Fprintf(&g.buf, format, args...)
	g.buf.WriteByte('\n')
}

// primitive resolves a field's domain to its primitive AMQP type.
func (g *generator) primitive(f field) (string, error) {
	t := f.Type
	if t == "" {
		t = f.Domain
	}
	for i := 0; i < 10; i++ {
		if _, ok := goTypes[t]; ok {
			if d, ok := g.domains[t]; !ok || d == t {
				return t, nil
			}
		}
		d, ok := g.domains[t]
		if !ok {
			return "", fmt.Errorf("field %s: unknown domain %q", f.Name, t)
		}
		if d == t {
			return t, nil
		}
		t = d
	}
	return "", fmt.Errorf("field %s: domain cycle", f.Name)
}

type resolved struct {
	name, goType, prim string
}

func (g *generator) fields(m method) ([]resolved, error) {
	out := make([]resolved, 0, len(m.Fields))
	for _, f := range m.Fields {
		prim, err := g.primitive(f)
		if err != nil {
			return nil, fmt.Errorf("method %s: %w", m.Name, err)
		}
		out = append(out, resolved{name: camel(f.Name), goType: goTypes[prim], prim: prim})
	}
	return out, nil
}

func (g *generator) constants(s *spec) {
	g.p("// Constants of the AMQP 0.9.1 specification: frame types, sizes and reply codes.")
	g.p("const (")
	for _, c := range s.Constants {
		if c.Class != "" {
			g.p("%s = %d // %s", camel(c.Name), c.Value, c.Class)
		} else {
			g.p("%s = %d", camel(c.Name), c.Value)
		}
	}
	g.p(")")
	g.p("")
	g.p("// Class ids.")
	g.p("const (")
	for _, c := range s.Classes {
		g.p("Class%s = %d", camel(c.Name), c.Index)
	}
	g.p(")")
	g.p("")
}

func (g *generator) method(c class, m method) error {
	typ := camel(c.Name) + camel(m.Name)
	fs, err := g.fields(m)
	if err != nil {
		return err
	}
	name := c.Name + "." + m.Name
	g.p("// %s is the AMQP method %s (class %d, method %d).", typ, name, c.Index, m.Index)
	g.p("type %s struct {", typ)
	for _, f := range fs {
		g.p("%s %s", f.name, f.goType)
	}
	g.p("}")
	g.p("")
	g.p("// ClassID returns %d.", c.Index)
	g.p("func (*%s) ClassID() uint16 { return %d }", typ, c.Index)
	g.p("// MethodID returns %d.", m.Index)
	g.p("func (*%s) MethodID() uint16 { return %d }", typ, m.Index)
	g.p("// Name returns %q.", name)
	g.p("func (*%s) Name() string { return %q }", typ, name)
	g.p("// HasContent reports whether a content header and body follow the method.")
	g.p("func (*%s) HasContent() bool { return %v }", typ, m.Content)
	g.p("")

	recv := "m"
	if len(fs) == 0 {
		recv = "_"
	}
	g.p("// Append appends the class id, method id and arguments to b.")
	g.p("func (%s *%s) Append(b []byte) []byte {", recv, typ)
	g.p("b = append(b, %d, %d, %d, %d)", c.Index>>8, c.Index&0xff, m.Index>>8, m.Index&0xff)
	for i := 0; i < len(fs); {
		f := fs[i]
		if f.prim == "bit" {
			j := i
			var terms []string
			for j < len(fs) && fs[j].prim == "bit" && j-i < 8 {
				terms = append(terms, fmt.Sprintf("bit(m.%s, %#02x)", fs[j].name, 1<<(j-i)))
				j++
			}
			g.p("b = append(b, %s)", strings.Join(terms, "|"))
			i = j
			continue
		}
		switch f.prim {
		case "octet":
			g.p("b = append(b, m.%s)", f.name)
		case "short":
			g.p("b = appendShort(b, m.%s)", f.name)
		case "long":
			g.p("b = appendLong(b, m.%s)", f.name)
		case "longlong", "timestamp":
			g.p("b = appendLonglong(b, m.%s)", f.name)
		case "shortstr":
			g.p("b = appendShortstr(b, m.%s)", f.name)
		case "longstr":
			g.p("b = appendLongstr(b, m.%s)", f.name)
		case "table":
			g.p("b = AppendTable(b, m.%s)", f.name)
		default:
			return fmt.Errorf("%s.%s: unsupported type %s", typ, f.name, f.prim)
		}
		i++
	}
	g.p("return b")
	g.p("}")
	g.p("")

	dname := "d"
	if len(fs) == 0 {
		recv, dname = "_", "_"
	}
	g.p("func (%s *%s) decode(%s *decoder) {", recv, typ, dname)
	for i := 0; i < len(fs); {
		f := fs[i]
		if f.prim == "bit" {
			j := i
			g.p("{")
			g.p("bits := d.octet()")
			for j < len(fs) && fs[j].prim == "bit" && j-i < 8 {
				g.p("m.%s = bits&%#02x != 0", fs[j].name, 1<<(j-i))
				j++
			}
			g.p("}")
			i = j
			continue
		}
		switch f.prim {
		case "longlong", "timestamp":
			g.p("m.%s = d.longlong()", f.name)
		default:
			g.p("m.%s = d.%s()", f.name, f.prim)
		}
		i++
	}
	g.p("}")
	g.p("")
	return nil
}

func (g *generator) dispatch(s *spec) {
	g.p("// decodeArguments decodes the arguments of the method (classID, methodID)")
	g.p("// from d. It returns nil for an unknown method.")
	g.p("func decodeArguments(classID, methodID uint16, d *decoder) Method {")
	g.p("switch uint32(classID)<<16 | uint32(methodID) {")
	for _, c := range s.Classes {
		for _, m := range c.Methods {
			typ := camel(c.Name) + camel(m.Name)
			g.p("case %d<<16 | %d:", c.Index, m.Index)
			g.p("m := new(%s)", typ)
			g.p("m.decode(d)")
			g.p("return m")
		}
	}
	g.p("}")
	g.p("return nil")
	g.p("}")
	g.p("")
	g.p("// MethodName returns the spec name (\"basic.publish\") of a class and")
	g.p("// method id, or \"\" if the specification defines no such method.")
	g.p("func MethodName(classID, methodID uint16) string {")
	g.p("switch uint32(classID)<<16 | uint32(methodID) {")
	for _, c := range s.Classes {
		for _, m := range c.Methods {
			g.p("case %d<<16 | %d:", c.Index, m.Index)
			g.p("return %q", c.Name+"."+m.Name)
		}
	}
	g.p("}")
	g.p("return \"\"")
	g.p("}")
	g.p("")
	g.p("// allMethods returns a zero value of every method, for tests.")
	g.p("func allMethods() []Method {")
	g.p("return []Method{")
	for _, c := range s.Classes {
		for _, m := range c.Methods {
			g.p("new(%s%s),", camel(c.Name), camel(m.Name))
		}
	}
	g.p("}")
	g.p("}")
}

// generate returns the gofmt'd Go source for the spec at specPath.
func generate(specPath string) ([]byte, error) {
	raw, err := os.ReadFile(specPath)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	var s spec
	if err := xml.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parse spec %s: %w", specPath, err)
	}
	g := &generator{domains: map[string]string{}}
	for _, d := range s.Domains {
		g.domains[d.Name] = d.Type
	}
	g.p("// Code generated by broker/amqp/wire/internal/gen from %s. DO NOT EDIT.", specPath)
	g.p("")
	g.p("package wire")
	g.p("")
	g.constants(&s)
	for _, c := range s.Classes {
		for _, m := range c.Methods {
			if err := g.method(c, m); err != nil {
				return nil, err
			}
		}
	}
	g.dispatch(&s)
	src, err := format.Source(g.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("gofmt generated code: %w\n%s", err, g.buf.Bytes())
	}
	return src, nil
}

func run(specPath, out string) error {
	src, err := generate(specPath)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, src, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}

func main() {
	specPath := flag.String("spec", "spec/amqp0-9-1.stripped.extended.xml", "AMQP 0.9.1 specification XML")
	out := flag.String("out", "spec_gen.go", "output Go file")
	flag.Parse()
	if err := run(*specPath, *out); err != nil {
		log.Fatal(err)
	}
}
