// Command holdconn opens a named AMQP connection with one consuming
// channel, publishes a message every few milliseconds through it, and
// holds it until the broker closes it (exit 0) or it is interrupted: the
// client that hack/interop/rabbitmqadmin/run.sh lists, shows and closes
// with rabbitmqadmin.
//
// Usage: holdconn URL CONNECTION_NAME QUEUE CONSUMER_TAG
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: holdconn URL CONNECTION_NAME QUEUE CONSUMER_TAG")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, "holdconn:", err)
		os.Exit(1)
	}
}

func run(url, name, queue, tag string) error {
	conn, err := amqp.DialConfig(url, amqp.Config{Properties: amqp.Table{"connection_name": name}})
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	if err := ch.Qos(10, 0, false); err != nil {
		return fmt.Errorf("qos: %w", err)
	}
	deliveries, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", queue, err)
	}
	go func() {
		for d := range deliveries {
			_ = d.Ack(false)
		}
	}()
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	fmt.Println("ready")
	for {
		select {
		case e := <-closed:
			fmt.Println("closed by the broker:", e)
			return nil
		case <-interrupt:
			return conn.Close()
		case <-tick.C:
			// Traffic for the rates rabbitmqadmin shows; an error here is
			// the connection closing, reported by closed.
			_ = ch.PublishWithContext(context.Background(), "", queue, false, false, amqp.Publishing{Body: []byte("tick")})
		}
	}
}
