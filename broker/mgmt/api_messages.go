package mgmt

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/meta"
	"github.com/warrenmq/warren/broker/queue"
)

// getMessages is POST /api/queues/{vhost}/{name}/get, RabbitMQ's "Get
// messages": it takes up to count ready messages as basic.get would and
// then, by ackmode, puts them back in their place marked redelivered
// (ack_requeue_true, reject_requeue_true), acks them (ack_requeue_false) or
// rejects them, dead-lettering them where the queue says so
// (reject_requeue_false). The messages are taken first and settled
// together, so a requeueing get of N returns N different messages. The
// user needs read permission on the queue in its vhost, as over AMQP.
func (s *Server) getMessages(w http.ResponseWriter, r *http.Request, u caller) {
	v, ok := s.vhostOr404(w, pathVhost(r, "vhost"))
	if !ok {
		return
	}
	name := pv(r, "name")
	var body struct {
		Count    any    `json:"count"`
		AckMode  string `json:"ackmode"`
		Encoding string `json:"encoding"`
		Truncate any    `json:"truncate"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeErr(w, err)
		return
	}
	count, err := intField("count", body.Count, true)
	if err != nil {
		writeErr(w, err)
		return
	}
	truncate, err := intField("truncate", body.Truncate, false)
	if err != nil {
		writeErr(w, err)
		return
	}
	settle, err := settlerFor(body.AckMode)
	if err != nil {
		writeErr(w, err)
		return
	}
	if body.Encoding != "auto" && body.Encoding != "base64" {
		writeErr(w, fmt.Errorf("%w: encoding must be auto or base64, not %q", errBadRequest, body.Encoding))
		return
	}
	if !s.allowed(w, u, v.Name(), meta.Read, "queue", name) {
		return
	}
	q, err := v.Queue(r.Context(), name, apiOwner)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []map[string]any{}
	var seqs []uint64
	// What one answer holds is bounded: a count of millions on a queue of
	// large messages stops at getBytesLimit of payload (at least one
	// message), not when the node runs out of memory.
	for held := 0; len(out) < count && held < getBytesLimit; {
		d, ok, err := q.Get(r.Context(), false)
		if err != nil {
			settle(q, seqs)
			if errors.Is(err, queue.ErrNotImplemented) {
				err = fmt.Errorf("%w: %v", errBadRequest, err)
			}
			writeErr(w, err)
			return
		}
		if !ok {
			break
		}
		seqs = append(seqs, d.Seq)
		out = append(out, messageJSON(d, body.Encoding == "base64", truncate))
		held += len(d.Msg.Body)
	}
	settle(q, seqs)
	writeJSON(w, http.StatusOK, out)
}

// getBytesLimit bounds the payload bytes one get answers with (the
// messages are held unacked and rendered in memory until it is written).
const getBytesLimit = 64 << 20

// apiOwner is the HTTP API's owner id for vhost.Queue: no connection has
// it, so an exclusive queue is always another's (resource-locked), as it is
// for a RabbitMQ management get.
const apiOwner = math.MaxUint64

// settlerFor maps an ackmode onto what happens to the messages a get took.
func settlerFor(mode string) (func(q queue.Queue, seqs []uint64), error) {
	var settle func(queue.Queue, []uint64)
	switch mode {
	case "ack_requeue_true", "reject_requeue_true":
		settle = queue.Queue.Requeue
	case "ack_requeue_false":
		settle = queue.Queue.Ack
	case "reject_requeue_false":
		settle = queue.Queue.Reject
	default:
		return nil, fmt.Errorf("%w: ackmode must be ack_requeue_true, ack_requeue_false, reject_requeue_true or reject_requeue_false, not %q", errBadRequest, mode)
	}
	return func(q queue.Queue, seqs []uint64) {
		if len(seqs) > 0 {
			settle(q, seqs)
		}
	}, nil
}

// intField reads a number the management UI may send as a JSON string.
// An absent optional field is 0 (for truncate: no truncation).
func intField(name string, v any, required bool) (int, error) {
	var n int64
	var err error
	switch x := v.(type) {
	case nil:
		if required {
			return 0, fmt.Errorf("%w: %s is required", errBadRequest, name)
		}
		return 0, nil
	case json.Number:
		n, err = x.Int64()
	case string:
		n, err = strconv.ParseInt(x, 10, 64)
	default:
		err = fmt.Errorf("not a number")
	}
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s must be a non-negative integer, not %v", errBadRequest, name, v)
	}
	return int(n), nil
}

// messageJSON renders a message as RabbitMQ's API does: the payload as a
// string when it is UTF-8 (encoding auto), else in base64, cut to truncate
// bytes when that is set; payload_bytes is always the whole size.
func messageJSON(d queue.Delivery, forceBase64 bool, truncate int) map[string]any {
	m := d.Msg
	payload := m.Body
	if truncate > 0 && len(payload) > truncate {
		payload = payload[:truncate]
	}
	enc, text := "string", string(payload)
	if forceBase64 || !utf8.Valid(payload) {
		enc, text = "base64", base64.StdEncoding.EncodeToString(payload)
	}
	return map[string]any{
		"payload_bytes":    len(m.Body),
		"redelivered":      d.Redelivered,
		"exchange":         m.Exchange,
		"routing_key":      m.RoutingKey,
		"message_count":    d.Remaining,
		"properties":       propertiesJSON(m.Props),
		"payload":          text,
		"payload_encoding": enc,
	}
}

// propertiesJSON renders the basic properties that are present, under
// RabbitMQ's names; properties that do not decode render as none.
func propertiesJSON(raw []byte) map[string]any {
	out := map[string]any{}
	if len(raw) == 0 {
		return out
	}
	p, err := wire.DecodeProperties(raw)
	if err != nil {
		return out
	}
	str := []struct {
		flag uint16
		name string
		val  string
	}{
		{wire.FlagContentType, "content_type", p.ContentType},
		{wire.FlagContentEncoding, "content_encoding", p.ContentEncoding},
		{wire.FlagCorrelationId, "correlation_id", p.CorrelationId},
		{wire.FlagReplyTo, "reply_to", p.ReplyTo},
		{wire.FlagExpiration, "expiration", p.Expiration},
		{wire.FlagMessageId, "message_id", p.MessageId},
		{wire.FlagType, "type", p.Type},
		{wire.FlagUserId, "user_id", p.UserId},
		{wire.FlagAppId, "app_id", p.AppId},
		{wire.FlagClusterId, "cluster_id", p.ClusterId},
	}
	for _, f := range str {
		if p.Flags&f.flag != 0 {
			out[f.name] = f.val
		}
	}
	if p.Flags&wire.FlagDeliveryMode != 0 {
		out["delivery_mode"] = p.DeliveryMode
	}
	if p.Flags&wire.FlagPriority != 0 {
		out["priority"] = p.Priority
	}
	if p.Flags&wire.FlagTimestamp != 0 {
		out["timestamp"] = p.Timestamp
	}
	if p.Flags&wire.FlagHeaders != 0 {
		out["headers"] = fieldJSON(p.Headers)
	}
	return out
}

// fieldJSON turns a field-table value into what encoding/json renders as
// RabbitMQ's API does: timestamps as Unix seconds, decimals as numbers,
// byte arrays as strings (base64 when not UTF-8), tables and arrays
// recursively.
func fieldJSON(v any) any {
	switch x := v.(type) {
	case wire.Table:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fieldJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fieldJSON(e)
		}
		return out
	case time.Time:
		return x.Unix()
	case wire.Decimal:
		return float64(x.Value) / math.Pow10(int(x.Scale))
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return base64.StdEncoding.EncodeToString(x)
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	}
	return v
}
