package mgmt_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/server"
)

// scrapeText returns an endpoint's text exposition.
func scrapeText(t *testing.T, url string, accept string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// missingLines returns the wanted lines the exposition does not have.
func missingLines(text string, want []string) []string {
	have := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		have[l] = true
	}
	var out []string
	for _, w := range want {
		if !have[w] {
			out = append(out, w)
		}
	}
	return out
}

// TestRabbitMQMetricsCount checks what the rabbitmq_* counters count after
// a known workload: messages (a multiple confirm of ten messages counts
// ten), deliveries by kind, and connections, channels and queues opened,
// closed, created and deleted.
func TestRabbitMQMetricsCount(t *testing.T) {
	n := brokertest.Start(t)
	base := "http://" + n.Addr(server.ListenerPrometheus).String()
	ctx := context.Background()

	conn := n.Dial(t)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	// Durable and persistent: confirmed after a group fsync, so one
	// basic.ack (multiple) confirms several messages.
	if _, err := ch.QueueDeclare("counted", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("counted", true, false, false, false, nil); err != nil { // declared, not created
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 20))
	for i := 0; i < 10; i++ {
		if err := ch.PublishWithContext(ctx, "", "counted", false, false, amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("0123456789")}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatalf("message %d nacked", c.DeliveryTag)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no confirm")
		}
	}
	_ = ch.PublishWithContext(ctx, "", "nowhere", true, false, amqp091.Publishing{Body: []byte("r")})  // returned
	_ = ch.PublishWithContext(ctx, "", "nowhere", false, false, amqp091.Publishing{Body: []byte("d")}) // dropped
	plain, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := plain.Get("counted", true); err != nil || !ok { // get, auto ack
		t.Fatalf("get: %v %v", ok, err)
	}
	d, ok, err := plain.Get("counted", false) // get, manual ack
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := d.Ack(false); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.QueueDeclare("empty", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := plain.Get("empty", false); ok {
		t.Fatal("got from an empty queue")
	}
	if _, err := plain.QueueDelete("empty", false, false, false); err != nil {
		t.Fatal(err)
	}
	if err := plain.Qos(3, 0, false); err != nil {
		t.Fatal(err)
	}
	msgs, err := plain.Consume("counted", "", false, false, false, false, nil) // consume, manual ack: 8 left
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		m := <-msgs
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}

	want := []string{
		`rabbitmq_global_messages_received_total{protocol="amqp091"} 12`,
		`rabbitmq_global_messages_received_confirm_total{protocol="amqp091"} 12`,
		`rabbitmq_global_messages_confirmed_total{protocol="amqp091"} 12`,
		`rabbitmq_global_messages_routed_total{protocol="amqp091"} 10`,
		`rabbitmq_global_messages_unroutable_returned_total{protocol="amqp091"} 1`,
		`rabbitmq_global_messages_unroutable_dropped_total{protocol="amqp091"} 1`,
		`rabbitmq_global_messages_delivered_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 10`,
		`rabbitmq_global_messages_delivered_get_auto_ack_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 1`,
		`rabbitmq_global_messages_delivered_get_manual_ack_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 1`,
		`rabbitmq_global_messages_delivered_consume_manual_ack_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 8`,
		`rabbitmq_global_messages_delivered_consume_auto_ack_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 0`,
		`rabbitmq_global_messages_get_empty_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 1`,
		`rabbitmq_global_messages_acknowledged_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 9`,
		`rabbitmq_global_messages_delivered_total{protocol="amqp091",queue_type="rabbit_quorum_queue"} 0`,
		`rabbitmq_global_messages_delivered_total{protocol="amqp091",queue_type="rabbit_stream_queue"} 0`,
		`rabbitmq_global_publishers{protocol="amqp091"} 1`,
		`rabbitmq_connections_opened_total 1`,
		`rabbitmq_channels_opened_total 2`,
		`rabbitmq_channels_closed_total 1`,
		`rabbitmq_channels 1`,
		`rabbitmq_connections 1`,
		`rabbitmq_queues_declared_total 3`,
		`rabbitmq_queues_created_total 2`,
		`rabbitmq_queues_deleted_total 1`,
		`rabbitmq_queues 1`,
		`rabbitmq_message_size_bytes_count{protocol="amqp091"} 12`,
		`rabbitmq_message_size_bytes_sum{protocol="amqp091"} 102`,
		`rabbitmq_message_size_bytes_bucket{protocol="amqp091",le="100"} 12`,
		`rabbitmq_identity_info{rabbitmq_cluster="warren@test",rabbitmq_cluster_permanent_id="` + n.ClusterID() + `",rabbitmq_endpoint="aggregated",rabbitmq_node="warren@test"} 1`,
	}
	eventually.Succeeds(t, 5*time.Second, "the counters after the workload", func() error {
		if miss := missingLines(scrapeText(t, base+"/metrics", ""), want); len(miss) > 0 {
			return errorList(miss)
		}
		return nil
	})

	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 5*time.Second, "the close counted", func() error {
		if miss := missingLines(scrapeText(t, base+"/metrics", ""), []string{
			`rabbitmq_connections_closed_total 1`, `rabbitmq_channels_closed_total 2`, `rabbitmq_connections 0`,
		}); len(miss) > 0 {
			return errorList(miss)
		}
		return nil
	})

	// OpenMetrics, which Prometheus asks for, writes le as RabbitMQ does.
	om := scrapeText(t, base+"/metrics", "application/openmetrics-text;version=1.0.0")
	if miss := missingLines(om, []string{`rabbitmq_message_size_bytes_bucket{protocol="amqp091",le="100.0"} 12`}); len(miss) > 0 {
		t.Errorf("OpenMetrics exposition lacks %v", miss)
	}
}

type errorList []string

func (e errorList) Error() string { return "missing:\n  " + strings.Join(e, "\n  ") }

// TestRabbitMQMetricsPerObject checks /metrics/per-object and
// /metrics/detailed: queue metrics per queue as RabbitMQ labels them,
// detailed only for the families and vhosts asked for.
func TestRabbitMQMetricsPerObject(t *testing.T) {
	n := brokertest.Start(t)
	base := "http://" + n.Addr(server.ListenerPrometheus).String()
	a := api{t: t, base: n.HTTPURL(), user: "guest", pass: "guest"}
	if code, body := a.do("PUT", "/api/vhosts/other", nil); code/100 != 2 {
		t.Fatalf("create vhost: %d %s", code, body)
	}
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("po", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := ch.PublishWithContext(context.Background(), "", "po", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	other, err := amqp091.Dial(n.URLFor("guest", "guest", "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	och, err := other.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := och.QueueDeclare("elsewhere", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	eventually.Succeeds(t, 5*time.Second, "per-object queue metrics", func() error {
		if miss := missingLines(scrapeText(t, base+"/metrics/per-object", ""), []string{
			`rabbitmq_queue_messages_ready{queue="po",vhost="/"} 3`,
			`rabbitmq_queue_messages_unacked{queue="po",vhost="/"} 0`,
			`rabbitmq_queue_messages{queue="po",vhost="/"} 3`,
			`rabbitmq_queue_consumers{queue="po",vhost="/"} 0`,
			`rabbitmq_queue_info{membership="leader",queue="po",queue_type="rabbit_classic_queue",vhost="/"} 1`,
			`rabbitmq_queue_messages_ready{queue="elsewhere",vhost="other"} 0`,
			`rabbitmq_queues 2`,
		}); len(miss) > 0 {
			return errorList(miss)
		}
		return nil
	})
	agg := scrapeText(t, base+"/metrics", "")
	if miss := missingLines(agg, []string{`rabbitmq_queue_messages_ready 3`}); len(miss) > 0 {
		t.Errorf("/metrics lacks %v", miss)
	}
	if strings.Contains(agg, `rabbitmq_queue_messages_ready{`) {
		t.Error("/metrics has per-queue series; RabbitMQ aggregates them there")
	}

	detailed := scrapeText(t, base+"/metrics/detailed?family=queue_coarse_metrics&vhost=other", "")
	if miss := missingLines(detailed, []string{
		`rabbitmq_detailed_queue_messages_ready{queue="elsewhere",vhost="other"} 0`,
		`rabbitmq_identity_info{rabbitmq_cluster="warren@test",rabbitmq_cluster_permanent_id="` + n.ClusterID() + `",rabbitmq_endpoint="detailed",rabbitmq_node="warren@test"} 1`,
	}); len(miss) > 0 {
		t.Errorf("/metrics/detailed lacks %v", miss)
	}
	for _, not := range []string{`queue="po"`, "rabbitmq_detailed_queue_consumers", "rabbitmq_global_"} {
		if strings.Contains(detailed, not) {
			t.Errorf("/metrics/detailed?family=queue_coarse_metrics&vhost=other has %s", not)
		}
	}
	churn := scrapeText(t, base+"/metrics/detailed?family=connection_churn_metrics", "")
	if !strings.Contains(churn, "rabbitmq_detailed_connections_opened_total 2") || strings.Contains(churn, "rabbitmq_detailed_queue_") {
		t.Errorf("/metrics/detailed?family=connection_churn_metrics:\n%s", churn)
	}
}

// TestRabbitMQMetricsStream checks the stream protocol's rabbitmq_global_*
// series: messages received and confirmed, publishers and consumers, and
// the error counters (a missing stream, a refused login).
func TestRabbitMQMetricsStream(t *testing.T) {
	n := brokertest.Start(t)
	base := "http://" + n.Addr(server.ListenerPrometheus).String()
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri(n.StreamURI()).SetRPCTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.DeclareStream("metered", nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer("metered", nil)
	if err != nil {
		t.Fatal(err)
	}
	confirms := p.NotifyPublishConfirmation()
	var batch []message.StreamMessage
	for i := 0; i < 5; i++ {
		batch = append(batch, streamamqp.NewMessage([]byte("s")))
	}
	if err := p.BatchSend(batch); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 5; {
		select {
		case cs := <-confirms:
			got += len(cs)
		case <-time.After(10 * time.Second):
			t.Fatalf("confirms: %d of 5", got)
		}
	}
	received := make(chan struct{}, 5)
	c, err := env.NewConsumer("metered", func(stream.ConsumerContext, *streamamqp.Message) { received <- struct{}{} },
		stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 5; i++ {
		select {
		case <-received:
		case <-time.After(10 * time.Second):
			t.Fatalf("consumed %d of 5", i)
		}
	}
	if err := env.DeleteStream("no-such-stream"); err == nil {
		t.Fatal("deleted a stream that does not exist")
	}
	if bad, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri(n.StreamURIFor("guest", "wrong", "/"))); err == nil {
		bad.Close()
		t.Fatal("a wrong password was accepted")
	}
	eventually.Succeeds(t, 5*time.Second, "the stream counters", func() error {
		if miss := missingLines(scrapeText(t, base+"/metrics", ""), []string{
			`rabbitmq_global_messages_received_total{protocol="stream"} 5`,
			`rabbitmq_global_messages_confirmed_total{protocol="stream"} 5`,
			`rabbitmq_global_messages_delivered_total{protocol="stream",queue_type="rabbit_stream_queue"} 5`,
			`rabbitmq_global_publishers{protocol="stream"} 1`,
			`rabbitmq_global_consumers{protocol="stream"} 1`,
			`rabbitmq_global_stream_error_stream_does_not_exist_total{protocol="stream"} 1`,
			`rabbitmq_global_stream_error_authentication_failure_total{protocol="stream"} 1`,
			`rabbitmq_global_stream_error_sasl_error_total{protocol="stream"} 0`,
		}); len(miss) > 0 {
			return errorList(miss)
		}
		return nil
	})
}
