package mgmt_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/server"
)

// dashboards are RabbitMQ's Grafana dashboards (testdata/grafana/README.md).
var dashboards = []string{"testdata/grafana/RabbitMQ-Overview.json", "testdata/grafana/RabbitMQ-Stream.json"}

// dashboardExprs returns every PromQL expression of a dashboard: the
// panels' targets and the template variables' queries.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition" || k == "query") && s != "prometheus" && s != "" {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return out
}

// selector is a metric a PromQL expression reads, with its label matchers.
type selector struct {
	metric   string
	matchers map[string]string // label = value ("$..." is a dashboard variable)
}

var (
	reString    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	reSelector  = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	reMatcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	reLabelList = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	reRange     = regexp.MustCompile(`\[[^\]]*\]`)
	reIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	reLabelVals = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
)

// promqlKeywords are PromQL's words that are not metric names.
var promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "Inf": true, "NaN": true}

// parseExpr finds the metrics an expression reads and the labels it groups
// and joins by.
func parseExpr(expr string) (sels []selector, groupLabels []string) {
	if m := reLabelVals.FindStringSubmatch(expr); m != nil { // Grafana's label_values(metric{...}, label)
		s := selector{metric: m[1], matchers: map[string]string{}}
		if sm := reSelector.FindStringSubmatch(expr); sm != nil && sm[1] == m[1] {
			addMatchers(s.matchers, sm[2])
		}
		return []selector{s}, nil
	}
	byMetric := map[string]*selector{}
	for _, sm := range reSelector.FindAllStringSubmatch(expr, -1) {
		s := selector{metric: sm[1], matchers: map[string]string{}}
		addMatchers(s.matchers, sm[2])
		sels = append(sels, s)
	}
	rest := reString.ReplaceAllString(expr, `""`)
	rest = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(rest, " ")
	for _, m := range reLabelList.FindAllStringSubmatch(rest, -1) {
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" && m[1] != "by" {
				groupLabels = append(groupLabels, l)
			}
		}
	}
	rest = reLabelList.ReplaceAllString(rest, " ")
	rest = reRange.ReplaceAllString(rest, " ")
	for _, loc := range reIdent.FindAllStringIndex(rest, -1) {
		id := rest[loc[0]:loc[1]]
		after := strings.TrimLeft(rest[loc[1]:], " \t\n")
		if promqlKeywords[id] || strings.HasPrefix(after, "(") || strings.HasPrefix(id, "$") || (loc[0] > 0 && rest[loc[0]-1] == '$') {
			continue
		}
		if byMetric[id] == nil {
			byMetric[id] = &selector{metric: id}
		}
	}
	for id, s := range byMetric {
		if !slices.ContainsFunc(sels, func(x selector) bool { return x.metric == id }) {
			sels = append(sels, *s)
		}
	}
	return sels, groupLabels
}

// addMatchers adds a selector's label matchers to m: an equality's value,
// or "$" (the label must be there) for the other operators.
func addMatchers(m map[string]string, matchers string) {
	for _, mm := range reMatcher.FindAllStringSubmatch(matchers, -1) {
		if mm[2] == "=" {
			m[mm[1]] = mm[3]
		} else {
			m[mm[1]] = "$"
		}
	}
}

// scrape reads a metrics endpoint and returns its samples by sample name
// (histograms as their _bucket, _sum and _count series).
func scrape(t *testing.T, url string) map[string][]model.LabelSet {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	out := map[string][]model.LabelSet{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			ls := model.LabelSet{}
			for _, l := range m.GetLabel() {
				ls[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
			}
			if f.GetType() == dto.MetricType_HISTOGRAM {
				out[name+"_sum"] = append(out[name+"_sum"], ls)
				out[name+"_count"] = append(out[name+"_count"], ls)
				for _, b := range m.GetHistogram().GetBucket() {
					bl := ls.Clone()
					bl["le"] = model.LabelValue(strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
					out[name+"_bucket"] = append(out[name+"_bucket"], bl)
				}
				inf := ls.Clone()
				inf["le"] = "+Inf"
				out[name+"_bucket"] = append(out[name+"_bucket"], inf)
				continue
			}
			out[name] = append(out[name], ls)
		}
	}
	return out
}

// prometheusLabels are the labels Prometheus itself attaches (the
// target's, and Kubernetes' namespace through relabelling).
var prometheusLabels = map[string]bool{"instance": true, "job": true, "namespace": true}

// hasSeries reports whether a scrape has a series of s.metric carrying
// every label s matches on, with the value where the dashboard fixes one.
func hasSeries(samples map[string][]model.LabelSet, s selector) bool {
	return slices.ContainsFunc(samples[s.metric], func(ls model.LabelSet) bool {
		for k, want := range s.matchers {
			if prometheusLabels[k] {
				continue
			}
			got, ok := ls[model.LabelName(k)]
			if !ok {
				return false
			}
			if strings.Contains(want, "$") {
				continue
			}
			if k == "le" { // "100.0" in the dashboards: compare as numbers
				w, err1 := strconv.ParseFloat(want, 64)
				g, err2 := strconv.ParseFloat(string(got), 64)
				if err1 != nil || err2 != nil || w != g {
					return false
				}
				continue
			}
			if string(got) != want {
				return false
			}
		}
		return true
	})
}

// TestDashboardMetricsExported checks that a running broker exports every
// metric RabbitMQ's Overview and Stream dashboards query, on /metrics and
// on /metrics/per-object, with the labels they select and join on.
func TestDashboardMetricsExported(t *testing.T) {
	n := brokertest.Start(t)
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("dash", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	base := "http://" + n.Addr(server.ListenerPrometheus).String()

	var sels []selector
	var joinLabels []string
	for _, d := range dashboards {
		exprs := dashboardExprs(t, d)
		if len(exprs) < 10 {
			t.Fatalf("%s: only %d expressions found", d, len(exprs))
		}
		for _, e := range exprs {
			s, g := parseExpr(e)
			sels = append(sels, s...)
			joinLabels = append(joinLabels, g...)
		}
	}
	metrics := map[string]bool{}
	for _, s := range sels {
		metrics[s.metric] = true
	}
	if len(metrics) < 50 || !metrics["rabbitmq_identity_info"] || !metrics["rabbitmq_global_stream_error_sasl_error_total"] {
		t.Fatalf("the expressions' metrics look wrong (%d): %v", len(metrics), metrics)
	}

	for _, endpoint := range []string{"/metrics", "/metrics/per-object"} {
		samples := scrape(t, base+endpoint)
		var missing []string
		for _, s := range sels {
			if !hasSeries(samples, s) {
				missing = append(missing, s.metric+fmtMatchers(s.matchers))
			}
		}
		sort.Strings(missing)
		missing = slices.Compact(missing)
		if len(missing) > 0 {
			t.Errorf("%s lacks what the dashboards query:\n  %s", endpoint, strings.Join(missing, "\n  "))
		}
		// group_left(...) takes its labels from rabbitmq_identity_info
		// (or rabbitmq_build_info); on(...) joins on Prometheus' labels.
		for _, l := range joinLabels {
			if prometheusLabels[l] {
				continue
			}
			if !hasSeries(samples, selector{metric: "rabbitmq_identity_info", matchers: map[string]string{l: "$"}}) &&
				!hasSeries(samples, selector{metric: "rabbitmq_build_info", matchers: map[string]string{l: "$"}}) {
				t.Errorf("%s: rabbitmq_identity_info and rabbitmq_build_info lack the join label %q", endpoint, l)
			}
		}
	}
}

func fmtMatchers(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for k, v := range m {
		if !prometheusLabels[k] {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}
