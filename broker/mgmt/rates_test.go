package mgmt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
	"github.com/warrenmq/warren/broker/brokertest/eventually"
	"github.com/warrenmq/warren/broker/config"
)

// TestMessageStatsRates: while messages flow, the overview's and the
// queue's message_stats carry counts and non-zero rates (as monitoring and
// rabbitmqadmin read them), and the rates fall back to 0 once they stop.
func TestMessageStatsRates(t *testing.T) {
	n := brokertest.Start(t, func(c *config.Config) { c.HTTP.CollectStatisticsInterval = 200 * time.Millisecond })
	a := newAPI(t, n)
	ch := n.Channel(t)
	if _, err := ch.QueueDeclare("flow", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("flow", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for d := range deliveries {
			_ = d.Ack(false)
		}
	}()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "flow", false, false, amqp091.Publishing{Body: []byte("m")})
			if err != nil {
				return
			}
			dc.Wait()
			_ = ch.PublishWithContext(ctx, "", "nowhere", false, false, amqp091.Publishing{Body: []byte("lost")})
			_ = ch.PublishWithContext(ctx, "", "nowhere", true, false, amqp091.Publishing{Body: []byte("returned")})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	tests := []struct {
		path  string
		stats []string
	}{
		{"/api/overview", []string{"publish", "deliver_get", "ack", "confirm", "drop_unroutable", "return_unroutable"}},
		{"/api/queues/%2F/flow", []string{"publish", "deliver_get", "ack"}},
		{"/api/exchanges/%2F/amq.default", []string{"publish_in", "publish_out"}},
		{"/api/channels", []string{"publish", "confirm", "deliver_get", "ack", "drop_unroutable", "return_unroutable"}},
	}
	for _, tt := range tests {
		t.Run(tt.path+" while messages flow", func(t *testing.T) {
			eventually.Succeeds(t, 10e9, "rates above 0", func() error {
				return checkRates(a, tt.path, tt.stats, func(r float64) bool { return r > 0 })
			})
		})
	}
	stop()
	<-done
	for _, tt := range tests {
		t.Run(tt.path+" once they stop", func(t *testing.T) {
			eventually.Succeeds(t, 10e9, "rates back to 0", func() error {
				return checkRates(a, tt.path, tt.stats, func(r float64) bool { return r == 0 })
			})
		})
	}
}

// TestChurnRates: connections and channels opened and closed and queues
// declared, created and deleted show in the overview's churn_rates as
// counts and rates (rabbitmqadmin show churn), the rates back to 0 after.
func TestChurnRates(t *testing.T) {
	n := brokertest.Start(t, func(c *config.Config) { c.HTTP.CollectStatisticsInterval = 200 * time.Millisecond })
	a := newAPI(t, n)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			conn, err := amqp091.Dial(n.URL())
			if err != nil {
				return
			}
			ch, err := conn.Channel()
			if err == nil {
				name := fmt.Sprintf("churn-%d", i)
				_, _ = ch.QueueDeclare(name, false, false, false, false, nil)
				_, _ = ch.QueueDeclare(name, false, false, false, false, nil)
				_, _ = ch.QueueDelete(name, false, false, false)
				_ = ch.Close()
			}
			_ = conn.Close()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	stats := []string{"connection_created", "connection_closed", "channel_created", "channel_closed", "queue_declared", "queue_created", "queue_deleted"}
	check := func(ok func(float64) bool) func() error {
		return func() error {
			var body map[string]any
			if err := json.Unmarshal(a.must("GET", "/api/overview", nil, 200), &body); err != nil {
				return err
			}
			churn, _ := body["churn_rates"].(map[string]any)
			for _, s := range stats {
				if c, _ := churn[s].(float64); c <= 0 {
					return fmt.Errorf("churn_rates.%s = %v, want a count above 0", s, churn[s])
				}
				if r, isNum := field(churn, s+"_details", "rate").(float64); !isNum || !ok(r) {
					return fmt.Errorf("churn_rates.%s_details.rate = %v", s, field(churn, s+"_details", "rate"))
				}
			}
			return nil
		}
	}
	eventually.Succeeds(t, 10e9, "churn rates above 0 while clients come and go", check(func(r float64) bool { return r > 0 }))
	stop()
	<-done
	eventually.Succeeds(t, 10e9, "churn rates back to 0", check(func(r float64) bool { return r == 0 }))
}

// checkRates reads path's message_stats and checks each stat has a count
// and a rate that ok accepts.
func checkRates(a api, path string, stats []string, ok func(float64) bool) error {
	var body any
	if err := json.Unmarshal(a.must("GET", path, nil, 200), &body); err != nil {
		return err
	}
	if list, ok := body.([]any); ok { // a list of one: the test's only channel
		if len(list) != 1 {
			return fmt.Errorf("%d items, want 1", len(list))
		}
		body = list[0]
	}
	ms, _ := field(body, "message_stats").(map[string]any)
	for _, s := range stats {
		if c, _ := ms[s].(float64); c <= 0 {
			return fmt.Errorf("message_stats.%s = %v, want a count above 0", s, ms[s])
		}
		r, isNum := field(ms, s+"_details", "rate").(float64)
		if !isNum || !ok(r) {
			return fmt.Errorf("message_stats.%s_details.rate = %v", s, field(ms, s+"_details", "rate"))
		}
	}
	return nil
}

// Publishes counted on several channels of one connection are each
// channel's and each exchange's, however the reader batches them: two
// channels publishing in turn to two exchanges count every message, on the
// channel it went on and the exchange it went to.
func TestPublishCountsOfChannelsSharingAConnection(t *testing.T) {
	n := brokertest.Start(t)
	a := newAPI(t, n)
	conn := n.Dial(t)
	chans := make([]*amqp091.Channel, 2)
	for i := range chans {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		chans[i] = ch
	}
	for _, x := range []string{"x1", "x2"} {
		if err := chans[0].ExchangeDeclare(x, "fanout", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 200
	for i := 0; i < rounds; i++ {
		for c, ch := range chans {
			// Channel c alternates between the exchanges, so every publish
			// changes channel or exchange from the one before.
			x := []string{"x1", "x2"}[(i+c)%2]
			if err := ch.PublishWithContext(context.Background(), x, "", false, false, amqp091.Publishing{Body: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually.Succeeds(t, 10*time.Second, "every publish counted", func() error {
		var channels []map[string]any
		if err := json.Unmarshal(a.must("GET", "/api/channels", nil, 200), &channels); err != nil {
			return err
		}
		for _, c := range channels {
			if p := field(c, "message_stats", "publish"); p != float64(rounds) {
				return fmt.Errorf("channel %v: publish %v, want %d", c["name"], p, rounds)
			}
		}
		for _, x := range []string{"x1", "x2"} {
			var body map[string]any
			if err := json.Unmarshal(a.must("GET", "/api/exchanges/%2F/"+x, nil, 200), &body); err != nil {
				return err
			}
			if p := field(body, "message_stats", "publish_in"); p != float64(rounds) {
				return fmt.Errorf("exchange %s: publish_in %v, want %d", x, p, rounds)
			}
		}
		return nil
	})
}
