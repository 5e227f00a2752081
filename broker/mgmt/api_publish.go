package mgmt

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	amqp "github.com/warrenmq/warren/broker/amqp"
	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
)

// publishConfirmTimeout bounds how long an HTTP publish waits for its
// queues to have the message (fsynced, for a persistent message in a
// durable queue) before it answers 503.
const publishConfirmTimeout = 10 * time.Second

// publishMessage is POST /api/exchanges/{vhost}/{name}/publish, RabbitMQ's
// "Publish message": it routes one message as basic.publish would (the
// default exchange is "amq.default" in the path) and answers {"routed":
// bool} once every queue it reached has it, as a publisher confirm would
// say. The user needs write permission on the exchange in its vhost, and a
// user_id property must name the user, as over AMQP.
func (s *Server) publishMessage(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	exchange := pv(r, "name")
	if exchange == "amq.default" {
		exchange = ""
	}
	var body struct {
		RoutingKey      string         `json:"routing_key"`
		Payload         *string        `json:"payload"`
		PayloadEncoding string         `json:"payload_encoding"`
		Properties      map[string]any `json:"properties"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeErr(w, err)
		return
	}
	if body.Payload == nil {
		writeErr(w, fmt.Errorf("%w: payload is required", errBadRequest))
		return
	}
	var payload []byte
	switch body.PayloadEncoding {
	case "string":
		payload = []byte(*body.Payload)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(*body.Payload)
		if err != nil {
			writeErr(w, fmt.Errorf("%w: payload is not base64: %v", errBadRequest, err))
			return
		}
		payload = b
	default:
		writeErr(w, fmt.Errorf("%w: payload_encoding must be string or base64, not %q", errBadRequest, body.PayloadEncoding))
		return
	}
	if len(body.RoutingKey) > 255 {
		writeErr(w, fmt.Errorf("%w: routing_key is longer than 255 bytes", errBadRequest))
		return
	}
	props, err := propertiesFromJSON(body.Properties)
	if err != nil {
		writeErr(w, err)
		return
	}
	if props.UserId != "" && props.UserId != u.Name {
		writeErr(w, fmt.Errorf("%w: user_id property set to '%s' but authenticated user was '%s'", errBadRequest, props.UserId, u.Name))
		return
	}
	if !s.allowed(w, u, v.Name(), meta.Write, "exchange", exchange) {
		return
	}
	x, err := v.Exchange(exchange)
	if err != nil {
		writeErr(w, err)
		return
	}
	if x.Internal {
		writeError(w, http.StatusUnauthorized, "not_authorised",
			fmt.Sprintf("cannot publish to internal exchange '%s' in vhost '%s'", exchange, v.Name()))
		return
	}
	if alarms := s.b.Alarms(); len(alarms) > 0 {
		writeError(w, http.StatusServiceUnavailable, "resource_alarm",
			fmt.Sprintf("publishing is blocked by the %s alarm", strings.Join(alarms, " and ")))
		return
	}
	msg, err := amqp.NewMessage(s.b.NewMessageID(), exchange, body.RoutingKey, props.Append(nil), payload)
	if err != nil {
		writeErr(w, fmt.Errorf("%w: %v", errBadRequest, err))
		return
	}
	qs, err := v.Route(r.Context(), exchange, body.RoutingKey, props.Headers, nil)
	if err != nil {
		writeErr(w, err)
		return
	}
	s.b.Counters().Published.Add(1)
	s.b.Counters().ObserveSize(len(msg.Body))
	accepted, err := publishConfirmed(r.Context(), qs, msg)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "publish_timeout", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"routed": accepted > 0})
}

// publishConfirmed publishes msg to qs and waits for each queue's confirm;
// it returns how many queues took the message (a full queue with x-overflow
// reject-publish refuses it).
func publishConfirmed(ctx context.Context, qs []queue.Queue, msg *message.Message) (int, error) {
	c := confirmWaiter(make(chan bool, len(qs)))
	for _, q := range qs {
		q.Publish([]queue.Publish{{Msg: msg, Confirm: c, Tag: 1}})
	}
	ctx, cancel := context.WithTimeout(ctx, publishConfirmTimeout)
	defer cancel()
	accepted := 0
	for range qs {
		select {
		case ok := <-c:
			if ok {
				accepted++
			}
		case <-ctx.Done():
			return accepted, fmt.Errorf("the queues did not confirm the message in time: %w", ctx.Err())
		}
	}
	return accepted, nil
}

// confirmWaiter receives one confirm per queue; its buffer holds them all,
// so Confirm never blocks a queue.
type confirmWaiter chan bool

func (c confirmWaiter) Confirm(tags []uint64, ok bool) {
	for range tags {
		c <- ok
	}
}

func displayExchange(name string) string {
	if name == "" {
		return "amq.default"
	}
	return name
}

// propertiesFromJSON reads RabbitMQ's JSON properties (content_type,
// headers, delivery_mode, ...) into basic properties. Numbers may be JSON
// numbers or strings, as the management UI sends them.
func propertiesFromJSON(in map[string]any) (wire.Properties, error) {
	var p wire.Properties
	strs := map[string]*string{
		"content_type": &p.ContentType, "content_encoding": &p.ContentEncoding,
		"correlation_id": &p.CorrelationId, "reply_to": &p.ReplyTo, "expiration": &p.Expiration,
		"message_id": &p.MessageId, "type": &p.Type, "user_id": &p.UserId, "app_id": &p.AppId,
		"cluster_id": &p.ClusterId,
	}
	octets := map[string]*uint8{"delivery_mode": &p.DeliveryMode, "priority": &p.Priority}
	for k, val := range in {
		var err error
		var n int
		if dst, ok := strs[k]; ok {
			*dst, err = shortstr(k, val)
		} else if dst, ok := octets[k]; ok {
			if n, err = intField(k, val, true); err == nil && n > 255 {
				err = fmt.Errorf("%w: %s must be at most 255", errBadRequest, k)
			}
			*dst = uint8(n)
		} else {
			switch k {
			case "timestamp":
				n, err = intField(k, val, true)
				p.Timestamp = uint64(n)
			case "headers":
				h, ok := normalizeNumbers(val).(map[string]any)
				if !ok && val != nil {
					err = fmt.Errorf("%w: headers must be an object", errBadRequest)
				}
				if len(h) > 0 {
					p.Headers = wire.Table(h)
				}
			default:
				err = fmt.Errorf("%w: unknown property %q", errBadRequest, k)
			}
		}
		if err != nil {
			return wire.Properties{}, err
		}
	}
	return p, nil
}

func shortstr(name string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %s must be a string", errBadRequest, name)
	}
	if len(s) > 255 {
		return "", fmt.Errorf("%w: %s is longer than 255 bytes", errBadRequest, name)
	}
	return s, nil
}
