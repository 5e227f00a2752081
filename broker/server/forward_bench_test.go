package server_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
)

// BenchmarkForwardedPublishConsume: a publisher (confirms, 1,000 in
// flight) and a consumer (prefetch 500, acks every 100) on the node that
// holds the queue, then both on another node, three rounds interleaved,
// transient and persistent messages: compare msgs/s.
func BenchmarkForwardedPublishConsume(b *testing.B) {
	c := brokertest.StartCluster(b, 2)
	if _, err := c.Nodes[1].Channel(b).QueueDeclare("bench", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	declareOnB(b, c.Nodes[0], "bench")
	for _, persistent := range []bool{false, true} {
		mode := "transient"
		if persistent {
			mode = "persistent"
		}
		for range 3 {
			for _, tc := range []struct {
				name string
				node *brokertest.Node
			}{{"owner", c.Nodes[1]}, {"other", c.Nodes[0]}} {
				b.Run(mode+"/"+tc.name, func(b *testing.B) { pubSub(b, tc.node, "bench", persistent) })
			}
		}
	}
}

func declareOnB(b *testing.B, n *brokertest.Node, q string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ch := n.Channel(b)
		_, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pubSub(b *testing.B, n *brokertest.Node, q string, persistent bool) {
	mode := amqp091.Transient
	if persistent {
		mode = amqp091.Persistent
	}
	cons := n.Channel(b)
	if err := cons.Qos(500, 0, false); err != nil {
		b.Fatal(err)
	}
	deliveries, err := cons.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	pub := n.Channel(b)
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	confirms := pub.NotifyPublish(make(chan amqp091.Confirmation, 2000))
	body := make([]byte, 100)
	done := make(chan struct{})
	b.ResetTimer()
	start := time.Now()
	go func() {
		defer close(done)
		for i := 1; i <= b.N; i++ {
			d := <-deliveries
			if i%100 == 0 || i == b.N {
				_ = d.Ack(true)
			}
		}
	}()
	ctx := context.Background()
	inflight := 0
	for i := 0; i < b.N; i++ {
		for inflight >= 1000 {
			<-confirms
			inflight--
		}
		if err := pub.PublishWithContext(ctx, "", q, false, false, amqp091.Publishing{Body: body, DeliveryMode: mode}); err != nil {
			b.Fatal(err)
		}
		inflight++
	}
	for ; inflight > 0; inflight-- {
		<-confirms
	}
	<-done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	_ = cons.Close()
}
