package amqp_test

import (
	"errors"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/brokertest"
)

// TestUnimplementedMethodsCloseTheConnection checks what RabbitMQ does with
// the two things a client may ask and RabbitMQ refuses: channel.flow
// active=false and basic.publish immediate=true close the connection with
// 540 NOT_IMPLEMENTED naming the method; channel.flow active=true is
// answered with flow-ok.
func TestUnimplementedMethodsCloseTheConnection(t *testing.T) {
	n := brokertest.Start(t)
	tests := []struct {
		name string
		do   func(ch *amqp091.Channel) error
		text string
	}{
		{"channel.flow active=false", func(ch *amqp091.Channel) error { return ch.Flow(false) }, "NOT_IMPLEMENTED - active=false"},
		{"basic.publish immediate=true", func(ch *amqp091.Channel) error {
			return ch.Publish("", "q", false, true, amqp091.Publishing{Body: []byte("x")})
		}, "NOT_IMPLEMENTED - immediate=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := n.Dial(t)
			ch, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
			_ = tt.do(ch) // the error, if any, is the close below
			var e *amqp091.Error
			select {
			case e = <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the connection was not closed")
			}
			if e == nil || e.Code != amqp091.NotImplemented || e.Reason != tt.text || !e.Server {
				t.Fatalf("connection closed with %+v, want 540 %q from the server", e, tt.text)
			}
		})
	}

	t.Run("channel.flow active=true", func(t *testing.T) {
		conn := n.Dial(t)
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Flow(true); err != nil {
			t.Fatalf("channel.flow active=true: %v", err)
		}
		// The channel still works.
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		if err != nil {
			t.Fatalf("declare after flow: %v", err)
		}
		if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: []byte("after flow")}); err != nil {
			t.Fatal(err)
		}
		d := consumeN(t, ch, q.Name, 1, true)
		if string(d[0].Body) != "after flow" {
			t.Fatalf("got %q", d[0].Body)
		}
		var amqpErr *amqp091.Error
		if err := ch.Close(); err != nil && !errors.As(err, &amqpErr) {
			t.Fatal(err)
		}
	})
}
