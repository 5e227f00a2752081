package mgmt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/server"
)

// prometheusBinary finds Prometheus: $WARREN_PROMETHEUS (make test sets it
// after hack/install-prometheus.sh installed the Debian package) or PATH.
// Without it the test is skipped, unless make test asked for it.
func prometheusBinary(t *testing.T) string {
	if p := os.Getenv("WARREN_PROMETHEUS"); p != "" {
		return p
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (make test installs it: hack/install-prometheus.sh)")
	}
	return p
}

// promQuery runs an instant query on Prometheus' HTTP API and returns the
// result's series.
func promQuery(base, query string) ([]json.RawMessage, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("query %s: %w", query, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", query, r.Error)
	}
	return r.Data.Result, nil
}

// dashboardVars fills a dashboard's variables as Grafana would for this
// broker scraped outside Kubernetes (no namespace label: namespace=""
// matches series without it).
func dashboardVars(expr, endpoint string) string {
	return strings.NewReplacer(
		"$rabbitmq_cluster", "warren@test", "$namespace", "", "$endpoint", endpoint,
		"$__rate_interval", "5s", "$__range", "1m",
	).Replace(expr)
}

// TestPrometheusScrape scrapes a broker with a real Prometheus (Debian's)
// and evaluates every expression of RabbitMQ's Overview and Stream
// dashboards: each must return data, for /metrics and for
// /metrics/per-object.
func TestPrometheusScrape(t *testing.T) {
	bin := prometheusBinary(t)
	n := brokertest.Start(t)
	target := n.Addr(server.ListenerPrometheus).String()

	// Publish all along, so the rates are not zero.
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("scraped", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = ch.PublishWithContext(ctx, "", "scraped", false, false, amqp091.Publishing{Body: []byte("scrape me")})
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })

	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: warren
    static_configs: [{targets: [%q]}]
  - job_name: warren-per-object
    metrics_path: /metrics/per-object
    static_configs: [{targets: [%q]}]
`, target, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", logs.String())
		}
	})
	base := "http://" + listen

	eventually.Succeeds(t, 30*time.Second, "prometheus scraped the broker's identity", func() error {
		r, err := promQuery(base, `rabbitmq_identity_info{rabbitmq_cluster="warren@test",rabbitmq_node="warren@test",rabbitmq_endpoint="aggregated"}`)
		if err == nil && len(r) == 0 {
			err = fmt.Errorf("no rabbitmq_identity_info yet")
		}
		return err
	})
	eventually.Succeeds(t, 30*time.Second, "a rate of received messages", func() error {
		r, err := promQuery(base, `rate(rabbitmq_global_messages_received_total{protocol="amqp091",job="warren"}[5s]) > 0`)
		if err == nil && len(r) == 0 {
			err = fmt.Errorf("no rate yet")
		}
		return err
	})

	var exprs []string
	for _, d := range dashboards {
		for _, e := range dashboardExprs(t, d) {
			if !strings.HasPrefix(e, "label_values(") { // Grafana's, not PromQL
				exprs = append(exprs, e)
			}
		}
	}
	for _, endpoint := range []string{"aggregated", "per-object"} {
		eventually.Succeeds(t, 20*time.Second, "every dashboard expression returns data for "+endpoint, func() error {
			var empty []string
			for _, e := range exprs {
				q := dashboardVars(e, endpoint)
				r, err := promQuery(base, q)
				if err != nil {
					return err
				}
				if len(r) == 0 {
					empty = append(empty, q)
				}
			}
			if len(empty) > 0 {
				return fmt.Errorf("%d of %d expressions return nothing, e.g.\n%s", len(empty), len(exprs), empty[0])
			}
			return nil
		})
	}
	r, err := promQuery(base, `rabbitmq_queue_messages_ready{job="warren-per-object",vhost="/",queue="scraped"}`)
	if err != nil || len(r) != 1 {
		t.Errorf("per-object queue series: %v %s", err, r)
	}
}
