package wire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/broker/amqp/wire"
)

// peer is the server side of a real socket: it reads with wire.Reader and
// writes frames built with the Append functions.
type peer struct {
	c net.Conn
	r *wire.Reader
}

func (p *peer) frame() (wire.Frame, error) {
	for {
		f, err := p.r.ReadFrame()
		if err != nil || f.Type != wire.FrameHeartbeat {
			return f, err
		}
	}
}

func (p *peer) method(channel uint16) (wire.Method, error) {
	f, err := p.frame()
	if err != nil {
		return nil, fmt.Errorf("read method frame: %w", err)
	}
	if f.Type != wire.FrameMethod || f.Channel != channel {
		return nil, fmt.Errorf("got frame type %d on channel %d, want a method on %d", f.Type, f.Channel, channel)
	}
	return wire.DecodeMethod(f.Payload)
}

func expect[M wire.Method](p *peer, channel uint16) (M, error) {
	var zero M
	m, err := p.method(channel)
	if err != nil {
		return zero, err
	}
	got, ok := m.(M)
	if !ok {
		return zero, fmt.Errorf("got %s, want %T", m.Name(), zero)
	}
	return got, nil
}

func (p *peer) send(b []byte) error {
	_, err := p.c.Write(b)
	return err
}

// content reads a content header and its body frames.
func (p *peer) content(channel uint16) (wire.ContentHeader, []byte, int, error) {
	f, err := p.frame()
	if err != nil || f.Type != wire.FrameHeader || f.Channel != channel {
		return wire.ContentHeader{}, nil, 0, fmt.Errorf("content header: type %d: %v", f.Type, err)
	}
	h, err := wire.DecodeContentHeader(f.Payload)
	if err != nil {
		return h, nil, 0, err
	}
	h.Properties = bytes.Clone(h.Properties) // the frame buffer is reused
	var body []byte
	frames := 0
	for uint64(len(body)) < h.BodySize {
		f, err := p.frame()
		if err != nil || f.Type != wire.FrameBody {
			return h, nil, 0, fmt.Errorf("body frame: type %d: %v", f.Type, err)
		}
		frames++
		body = append(body, f.Payload...)
	}
	return h, body, frames, nil
}

var (
	ts          = time.Unix(1700000000, 0)
	publishBody = bytes.Repeat([]byte("warren "), 1500) // 10500 bytes: three frames at frame-max 4096
	publishing  = amqp.Publishing{
		Headers:         amqp.Table{"x-int": int32(7), "x-str": "s", "x-list": []any{"a", int64(2)}},
		ContentType:     "text/plain",
		ContentEncoding: "identity",
		DeliveryMode:    amqp.Persistent,
		Priority:        5,
		CorrelationId:   "corr-1",
		ReplyTo:         "replies",
		Expiration:      "60000",
		MessageId:       "m-1",
		Timestamp:       ts,
		Type:            "greeting",
		UserId:          "guest",
		AppId:           "interop",
		Body:            publishBody,
	}
)

// serve plays the broker for one amqp091-go connection.
func serve(p *peer) error {
	hdr, err := p.r.ReadProtocolHeader()
	if err != nil {
		return err
	}
	if string(hdr[:]) != wire.ProtocolHeader {
		return fmt.Errorf("protocol header %q", hdr)
	}
	start := &wire.ConnectionStart{
		VersionMajor: 0, VersionMinor: 9,
		ServerProperties: wire.Table{"product": "warren", "capabilities": wire.Table{"publisher_confirms": true, "basic.nack": true}},
		Mechanisms:       "PLAIN AMQPLAIN", Locales: "en_US",
	}
	if err := p.send(wire.AppendMethodFrame(nil, 0, start)); err != nil {
		return err
	}
	startOk, err := expect[*wire.ConnectionStartOk](p, 0)
	if err != nil {
		return err
	}
	if startOk.Mechanism != "PLAIN" || startOk.Response != "\x00guest\x00guest" || startOk.Locale != "en_US" {
		return fmt.Errorf("start-ok mechanism %q response %q locale %q", startOk.Mechanism, startOk.Response, startOk.Locale)
	}
	caps, _ := startOk.ClientProperties["capabilities"].(wire.Table)
	if caps["consumer_cancel_notify"] != true || startOk.ClientProperties["product"] == nil {
		return fmt.Errorf("client properties %#v", startOk.ClientProperties)
	}
	if err := p.send(wire.AppendMethodFrame(nil, 0, &wire.ConnectionTune{ChannelMax: 2047, FrameMax: wire.FrameMinSize})); err != nil {
		return err
	}
	tuneOk, err := expect[*wire.ConnectionTuneOk](p, 0)
	if err != nil {
		return err
	}
	if tuneOk.FrameMax != wire.FrameMinSize {
		return fmt.Errorf("tune-ok frame-max %d", tuneOk.FrameMax)
	}
	p.r.SetMaxFrameSize(tuneOk.FrameMax)
	open, err := expect[*wire.ConnectionOpen](p, 0)
	if err != nil {
		return err
	}
	if open.VirtualHost != "/" {
		return fmt.Errorf("vhost %q", open.VirtualHost)
	}
	if err := p.send(wire.AppendMethodFrame(nil, 0, &wire.ConnectionOpenOk{})); err != nil {
		return err
	}

	if _, err := expect[*wire.ChannelOpen](p, 1); err != nil {
		return err
	}
	if err := p.send(wire.AppendMethodFrame(nil, 1, &wire.ChannelOpenOk{})); err != nil {
		return err
	}
	qd, err := expect[*wire.QueueDeclare](p, 1)
	if err != nil {
		return err
	}
	wantArgs := wire.Table{
		"x-queue-type": "quorum", "x-max-length": int32(10), "x-message-ttl": int64(1000),
		"flag": true, "f": 1.5, "nested": wire.Table{"b": []byte{1, 2}}, "void": nil,
	}
	if qd.Queue != "q1" || !qd.Durable || qd.Exclusive || qd.AutoDelete || qd.NoWait || !reflect.DeepEqual(qd.Arguments, wantArgs) {
		return fmt.Errorf("queue.declare %#v", qd)
	}
	if err := p.send(wire.AppendMethodFrame(nil, 1, &wire.QueueDeclareOk{Queue: qd.Queue, MessageCount: 3, ConsumerCount: 1})); err != nil {
		return err
	}

	pub, err := expect[*wire.BasicPublish](p, 1)
	if err != nil {
		return err
	}
	if pub.Exchange != "" || pub.RoutingKey != "q1" || !pub.Mandatory || pub.Immediate {
		return fmt.Errorf("basic.publish %#v", pub)
	}
	h, body, frames, err := p.content(1)
	if err != nil {
		return err
	}
	if h.ClassID != wire.ClassBasic || !bytes.Equal(body, publishBody) || frames != 3 {
		return fmt.Errorf("content class %d, %d body bytes in %d frames", h.ClassID, len(body), frames)
	}
	props, err := wire.DecodeProperties(h.Properties)
	if err != nil {
		return err
	}
	wantProps := wire.Properties{
		ContentType: "text/plain", ContentEncoding: "identity",
		Headers:      wire.Table{"x-int": int32(7), "x-str": "s", "x-list": []any{"a", int64(2)}},
		DeliveryMode: 2, Priority: 5, CorrelationId: "corr-1", ReplyTo: "replies", Expiration: "60000",
		MessageId: "m-1", Timestamp: uint64(ts.Unix()), Type: "greeting", UserId: "guest", AppId: "interop",
		Flags: 0xfff8, // all but cluster-id
	}
	if !reflect.DeepEqual(props, wantProps) {
		return fmt.Errorf("properties\n got %#v\nwant %#v", props, wantProps)
	}
	if exp, ok, err := wire.PropertiesExpiration(h.Properties); exp != "60000" || !ok || err != nil {
		return fmt.Errorf("PropertiesExpiration = %q %v %v", exp, ok, err)
	}

	consume, err := expect[*wire.BasicConsume](p, 1)
	if err != nil {
		return err
	}
	if err := p.send(wire.AppendMethodFrame(nil, 1, &wire.BasicConsumeOk{ConsumerTag: consume.ConsumerTag})); err != nil {
		return err
	}
	// Deliver the published message back, forwarding its raw properties.
	out := wire.AppendMethodFrame(nil, 1, &wire.BasicDeliver{ConsumerTag: consume.ConsumerTag, DeliveryTag: 42, Redelivered: true, RoutingKey: "q1"})
	out = wire.AppendHeaderFrame(out, 1, wire.ClassBasic, uint64(len(body)), h.Properties)
	out = wire.AppendBodyFrames(out, 1, body, tuneOk.FrameMax)
	if err := p.send(out); err != nil {
		return err
	}

	ack, err := expect[*wire.BasicAck](p, 1)
	if err != nil {
		return err
	}
	if ack.DeliveryTag != 42 || ack.Multiple {
		return fmt.Errorf("basic.ack %#v", ack)
	}
	cl, err := expect[*wire.ConnectionClose](p, 0)
	if err != nil {
		return err
	}
	if cl.ReplyCode != wire.ReplySuccess {
		return fmt.Errorf("connection.close %#v", cl)
	}
	return p.send(wire.AppendMethodFrame(nil, 0, &wire.ConnectionCloseOk{}))
}

// TestInteropAMQP091 runs the real amqp091-go client against a scripted
// server built on this package, over TCP: handshake, queue.declare with a
// table of many types, a persistent publish split across frames, and a
// delivery whose properties the client must see unchanged.
func TestInteropAMQP091(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		errc <- serve(&peer{c: c, r: wire.NewReader(c, 4096)})
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := amqp.DialConfig("amqp://guest:guest@"+ln.Addr().String()+"/", amqp.Config{Heartbeat: 0, Locale: "en_US"})
	if err != nil {
		t.Fatalf("Dial: %v (server: %v)", err, drain(errc))
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("Channel: %v", err)
	}
	q, err := ch.QueueDeclare("q1", true, false, false, false, amqp.Table{
		"x-queue-type": "quorum", "x-max-length": int32(10), "x-message-ttl": int64(1000),
		"flag": true, "f": 1.5, "nested": amqp.Table{"b": []byte{1, 2}}, "void": nil,
	})
	if err != nil {
		t.Fatalf("QueueDeclare: %v (server: %v)", err, drain(errc))
	}
	if q.Name != "q1" || q.Messages != 3 || q.Consumers != 1 {
		t.Fatalf("declare-ok as seen by the client: %+v", q)
	}
	if err := ch.PublishWithContext(ctx, "", "q1", true, false, publishing); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	deliveries, err := ch.Consume("q1", "ctag", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("Consume: %v (server: %v)", err, drain(errc))
	}
	var d amqp.Delivery
	select {
	case d = <-deliveries:
	case err := <-errc:
		t.Fatalf("server: %v", err)
	case <-ctx.Done():
		t.Fatal("no delivery")
	}
	if d.ConsumerTag != "ctag" || d.DeliveryTag != 42 || !d.Redelivered || d.RoutingKey != "q1" || !bytes.Equal(d.Body, publishBody) {
		t.Fatalf("delivery %q tag %d redelivered %v key %q body %d bytes", d.ConsumerTag, d.DeliveryTag, d.Redelivered, d.RoutingKey, len(d.Body))
	}
	if d.ContentType != publishing.ContentType || d.ContentEncoding != publishing.ContentEncoding ||
		d.DeliveryMode != publishing.DeliveryMode || d.Priority != publishing.Priority ||
		d.CorrelationId != publishing.CorrelationId || d.ReplyTo != publishing.ReplyTo ||
		d.Expiration != publishing.Expiration || d.MessageId != publishing.MessageId ||
		!d.Timestamp.Equal(ts) || d.Type != publishing.Type || d.UserId != publishing.UserId ||
		d.AppId != publishing.AppId || !reflect.DeepEqual(d.Headers, publishing.Headers) {
		t.Fatalf("delivery properties differ from the publish:\n%+v", d)
	}
	if err := d.Ack(false); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server: %v", err)
	}
}

func drain(errc <-chan error) error {
	select {
	case err := <-errc:
		return err
	case <-time.After(time.Second):
		return errors.New("still running")
	}
}
