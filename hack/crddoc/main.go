// Command crddoc writes the reference of a CRD, generated from its OpenAPI
// schema (whose descriptions are the Go comments of api/v1alpha1), into a
// Markdown file between the markers
//
//	<!-- crd-reference:start --> and <!-- crd-reference:end -->
//
// Usage: go run ./hack/crddoc -crd config/crd/bases/warrenmq.io_brokers.yaml -doc docs/operator.md
// (make docs-crd). With -check it fails when the file is out of date.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	startMarker = "<!-- crd-reference:start -->"
	endMarker   = "<!-- crd-reference:end -->"
)

// opaque are fields of Kubernetes' own types: documented upstream, named
// here and not expanded.
var opaque = map[string]string{
	"spec.affinity":                  "[core/v1 Affinity](https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#scheduling)",
	"spec.tolerations":               "list of [core/v1 Toleration](https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#scheduling)",
	"spec.topologySpreadConstraints": "list of [core/v1 TopologySpreadConstraint](https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#scheduling)",
	"spec.resources":                 "[core/v1 ResourceRequirements](https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#resources)",
	"spec.imagePullSecrets":          "list of [core/v1 LocalObjectReference](https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/local-object-reference/)",
	"status.conditions":              "list of [meta/v1 Condition](https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/object-meta/)",
}

func main() {
	crdPath := flag.String("crd", "", "CRD YAML file")
	docPath := flag.String("doc", "", "Markdown file to update between the markers")
	check := flag.Bool("check", false, "fail if -doc is not up to date instead of writing it")
	flag.Parse()
	if err := run(*crdPath, *docPath, *check); err != nil {
		fmt.Fprintln(os.Stderr, "crddoc:", err)
		os.Exit(1)
	}
}

func run(crdPath, docPath string, check bool) error {
	data, err := os.ReadFile(crdPath)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", crdPath, err)
	}
	ref, err := Render(&crd)
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	start := bytes.Index(doc, []byte(startMarker))
	end := bytes.Index(doc, []byte(endMarker))
	if start < 0 || end < start {
		return fmt.Errorf("%s: markers %s and %s not found", docPath, startMarker, endMarker)
	}
	var out bytes.Buffer
	out.Write(doc[:start+len(startMarker)])
	out.WriteString("\n" + ref)
	out.Write(doc[end:])
	if bytes.Equal(out.Bytes(), doc) {
		return nil
	}
	if check {
		return fmt.Errorf("%s is out of date: run make docs-crd", docPath)
	}
	return os.WriteFile(docPath, out.Bytes(), 0o644)
}

// Render returns the Markdown reference of the CRD's first served version.
func Render(crd *apiextensionsv1.CustomResourceDefinition) (string, error) {
	if len(crd.Spec.Versions) == 0 || crd.Spec.Versions[0].Schema == nil {
		return "", fmt.Errorf("CRD %s has no schema", crd.Name)
	}
	v := crd.Spec.Versions[0]
	root := v.Schema.OpenAPIV3Schema
	var b strings.Builder
	fmt.Fprintf(&b, "Generated from the CRD (`make docs-crd`); do not edit by hand.\n\n")
	fmt.Fprintf(&b, "`apiVersion: %s/%s`, `kind: %s`, short name `%s`, namespaced.\n\n",
		crd.Spec.Group, v.Name, crd.Spec.Names.Kind, strings.Join(crd.Spec.Names.ShortNames, "`, `"))
	if d := root.Description; d != "" {
		fmt.Fprintf(&b, "%s\n\n", oneLine(d))
	}
	for _, top := range []string{"spec", "status"} {
		s, ok := root.Properties[top]
		if !ok {
			continue
		}
		section(&b, top, s)
	}
	return b.String(), nil
}

// section writes the table of one object and then, depth first, the
// tables of the objects under it.
func section(b *strings.Builder, path string, s apiextensionsv1.JSONSchemaProps) {
	fmt.Fprintf(b, "### `%s`\n\n", path)
	if s.Description != "" {
		fmt.Fprintf(b, "%s\n\n", oneLine(s.Description))
	}
	for _, r := range s.XValidations {
		fmt.Fprintf(b, "Rule: %s (`%s`).\n\n", r.Message, r.Rule)
	}
	b.WriteString("| field | type | default | validation | description |\n| --- | --- | --- | --- | --- |\n")
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	var nested []string
	for _, n := range names {
		p := s.Properties[n]
		fp := path + "." + n
		typ := typeOf(fp, p)
		if t, ok := opaque[fp]; ok {
			typ = t
		} else if sub := objectOf(p); sub != nil && len(sub.Properties) > 0 {
			nested = append(nested, n)
			typ = fmt.Sprintf("[%s](#%s)", typ, anchor(fp))
		}
		desc := oneLine(p.Description)
		if required[n] {
			desc = "**Required.** " + desc
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", n, typ, defaultOf(p), validationOf(p), cell(desc))
	}
	b.WriteString("\n")
	for _, n := range nested {
		section(b, path+"."+n, *objectOf(s.Properties[n]))
	}
}

func objectOf(p apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	if p.Type == "array" && p.Items != nil && p.Items.Schema != nil {
		return p.Items.Schema
	}
	if p.Type == "object" {
		return &p
	}
	return nil
}

func typeOf(path string, p apiextensionsv1.JSONSchemaProps) string {
	switch {
	case p.XIntOrString:
		return "quantity (integer or string)"
	case p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields:
		return "object (free-form)"
	case p.Type == "array" && p.Items != nil && p.Items.Schema != nil:
		return "list of " + typeOf(path, *p.Items.Schema)
	case p.Type == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil:
		return "map of " + p.AdditionalProperties.Schema.Type
	case p.Format != "":
		return p.Type + " (" + p.Format + ")"
	default:
		return p.Type
	}
}

func defaultOf(p apiextensionsv1.JSONSchemaProps) string {
	if p.Default == nil {
		return ""
	}
	return "`" + strings.ReplaceAll(string(p.Default.Raw), "|", "\\|") + "`"
}

func validationOf(p apiextensionsv1.JSONSchemaProps) string {
	var v []string
	if len(p.Enum) > 0 {
		var vals []string
		for _, e := range p.Enum {
			vals = append(vals, "`"+strings.Trim(string(e.Raw), `"`)+"`")
		}
		v = append(v, "one of "+strings.Join(vals, ", "))
	}
	if p.Minimum != nil {
		v = append(v, fmt.Sprintf("≥ %v", *p.Minimum))
	}
	if p.Maximum != nil {
		v = append(v, fmt.Sprintf("≤ %v", *p.Maximum))
	}
	if p.MinLength != nil {
		v = append(v, fmt.Sprintf("length ≥ %d", *p.MinLength))
	}
	if p.MaxLength != nil {
		v = append(v, fmt.Sprintf("length ≤ %d", *p.MaxLength))
	}
	if p.MaxItems != nil {
		v = append(v, fmt.Sprintf("at most %d items", *p.MaxItems))
	}
	if p.XListType != nil && *p.XListType == "map" {
		v = append(v, "unique by "+strings.Join(p.XListMapKeys, ", "))
	}
	if p.Pattern != "" && !p.XIntOrString {
		v = append(v, "pattern `"+p.Pattern+"`")
	}
	for _, r := range p.XValidations {
		v = append(v, r.Message)
	}
	return cell(strings.Join(v, "; "))
}

func anchor(path string) string {
	return strings.ToLower(strings.ReplaceAll(path, ".", ""))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
