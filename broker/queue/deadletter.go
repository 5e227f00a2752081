package queue

import (
	"time"

	"github.com/warrenmq/warren/broker/amqp/wire"
	"github.com/warrenmq/warren/broker/message"
)

// deadLetter republishes messages to the queue's dead-letter exchange with
// RabbitMQ's x-death header. Without x-dead-letter-exchange they are dropped.
func (q *Classic) deadLetter(msgs []*message.Message, reason string) {
	if q.args.DeadLetterExchange == nil || len(msgs) == 0 {
		return
	}
	dlx := *q.args.DeadLetterExchange
	out := make([]*message.Message, 0, len(msgs))
	for _, m := range msgs {
		dm, err := deadLettered(m, q.info.Name, reason, dlx, q.args.DeadLetterRoutingKey, q.now(), q.cfg.Host.NewMessageID())
		if err != nil {
			q.log.Warn("cannot dead-letter a message with malformed properties", "err", err)
			continue
		}
		out = append(out, dm)
	}
	q.cfg.Host.DeadLetter(dlx, out)
}

// deadLettered builds the dead-lettered copy of m.
func deadLettered(m *message.Message, queue, reason, dlx string, dlrk *string, now time.Time, id uint64) (*message.Message, error) {
	props, err := wire.DecodeProperties(m.Props)
	if err != nil {
		return nil, err
	}
	headers := wire.Table{}
	for k, v := range props.Headers {
		headers[k] = v
	}
	keys := []any{m.RoutingKey}
	entry := wire.Table{
		"count":        int64(1),
		"reason":       reason,
		"queue":        queue,
		"time":         now.Truncate(time.Second),
		"exchange":     m.Exchange,
		"routing-keys": keys,
	}
	if reason == "expired" && props.Expiration != "" {
		entry["original-expiration"] = props.Expiration
		props.Expiration = ""
		props.Flags &^= wire.FlagExpiration
	}
	var deaths []any
	if old, ok := headers["x-death"].([]any); ok {
		for _, d := range old {
			t, ok := d.(wire.Table)
			if ok && t["queue"] == queue && t["reason"] == reason {
				n, _ := message.FieldInt(t["count"])
				entry["count"] = n + 1
				if rk, ok := t["routing-keys"]; ok {
					entry["routing-keys"] = rk
				}
				continue
			}
			deaths = append(deaths, d)
		}
	}
	headers["x-death"] = append([]any{entry}, deaths...)
	if _, ok := headers["x-first-death-reason"]; !ok {
		headers["x-first-death-reason"] = reason
		headers["x-first-death-queue"] = queue
		headers["x-first-death-exchange"] = m.Exchange
	}
	headers["x-last-death-reason"] = reason
	headers["x-last-death-queue"] = queue
	headers["x-last-death-exchange"] = m.Exchange
	props.Headers = headers
	props.Flags |= wire.FlagHeaders
	key := m.RoutingKey
	if dlrk != nil {
		key = *dlrk
	}
	return &message.Message{
		ID:         id,
		Exchange:   dlx,
		RoutingKey: key,
		Props:      props.Append(nil),
		Body:       m.Body,
		Persistent: m.Persistent,
		Priority:   m.Priority,
		Timestamp:  now.UnixNano(),
	}, nil
}
