package queue

import (
	"fmt"
	"strconv"
	"time"

	"github.com/warrenmq/warren/broker/message"
)

// Args are a queue's parsed x-arguments.
type Args struct {
	MessageTTL           time.Duration
	HasMessageTTL        bool
	Expires              time.Duration
	MaxLength            int64 // -1 when unset
	MaxLengthBytes       int64 // -1 when unset
	Overflow             string
	DeadLetterExchange   *string
	DeadLetterRoutingKey *string
	SingleActiveConsumer bool
	MaxPriority          uint8
	QueueType            string
	QueueVersion         int
	MaxAge               time.Duration
	StreamMaxSegmentSize int64
}

// ParseArgs validates queue arguments as RabbitMQ does. Errors wrap
// ErrInvalidArgument and carry RabbitMQ's wording.
func ParseArgs(args map[string]any) (Args, error) {
	a := Args{MaxLength: -1, MaxLengthBytes: -1, Overflow: "drop-head"}
	bad := func(k string, v any, why string) error {
		return fmt.Errorf("%w: invalid arg '%s': %v (%s)", ErrInvalidArgument, k, v, why)
	}
	for k, v := range args {
		switch k {
		case "x-message-ttl":
			n, ok := message.FieldInt(v)
			if !ok || n < 0 {
				return a, bad(k, v, "must be a non-negative integer")
			}
			a.MessageTTL, a.HasMessageTTL = time.Duration(n)*time.Millisecond, true
		case "x-expires":
			n, ok := message.FieldInt(v)
			if !ok || n <= 0 {
				return a, bad(k, v, "must be a positive integer")
			}
			a.Expires = time.Duration(n) * time.Millisecond
		case "x-max-length":
			n, ok := message.FieldInt(v)
			if !ok || n < 0 {
				return a, bad(k, v, "must be a non-negative integer")
			}
			a.MaxLength = n
		case "x-max-length-bytes":
			n, ok := message.FieldInt(v)
			if !ok || n < 0 {
				return a, bad(k, v, "must be a non-negative integer")
			}
			a.MaxLengthBytes = n
		case "x-overflow":
			s, ok := toString(v)
			if !ok || (s != "drop-head" && s != "reject-publish" && s != "reject-publish-dlx") {
				return a, bad(k, v, "must be drop-head, reject-publish or reject-publish-dlx")
			}
			a.Overflow = s
		case "x-dead-letter-exchange":
			s, ok := toString(v)
			if !ok {
				return a, bad(k, v, "must be a string")
			}
			a.DeadLetterExchange = &s
		case "x-dead-letter-routing-key":
			s, ok := toString(v)
			if !ok {
				return a, bad(k, v, "must be a string")
			}
			a.DeadLetterRoutingKey = &s
		case "x-single-active-consumer":
			b, ok := v.(bool)
			if !ok {
				return a, bad(k, v, "must be a boolean")
			}
			a.SingleActiveConsumer = b
		case "x-max-priority":
			n, ok := message.FieldInt(v)
			if !ok || n < 0 || n > 255 {
				return a, bad(k, v, "must be an integer between 0 and 255")
			}
			a.MaxPriority = uint8(n)
		case "x-queue-type":
			s, ok := toString(v)
			if !ok || (s != "classic" && s != "quorum" && s != "stream") {
				return a, bad(k, v, "must be classic, quorum or stream")
			}
			a.QueueType = s
		case "x-queue-version":
			n, ok := message.FieldInt(v)
			if !ok || (n != 1 && n != 2) {
				return a, bad(k, v, "must be 1 or 2")
			}
			a.QueueVersion = int(n)
		case "x-max-age":
			s, ok := toString(v)
			d, err := parseAge(s)
			if !ok || err != nil {
				return a, bad(k, v, "must be a duration such as 7D, 12h, 30m, 10s")
			}
			a.MaxAge = d
		case "x-stream-max-segment-size-bytes":
			n, ok := message.FieldInt(v)
			if !ok || n <= 0 {
				return a, bad(k, v, "must be a positive integer")
			}
			a.StreamMaxSegmentSize = n
		}
	}
	if a.DeadLetterRoutingKey != nil && a.DeadLetterExchange == nil {
		return a, fmt.Errorf("%w: x-dead-letter-routing-key requires x-dead-letter-exchange", ErrInvalidArgument)
	}
	return a, nil
}

// parseAge parses RabbitMQ's x-max-age units: Y, M, D, h, m, s.
func parseAge(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("bad age %q", s)
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad age %q", s)
	}
	unit := map[byte]time.Duration{'Y': 365 * 24 * time.Hour, 'M': 30 * 24 * time.Hour, 'D': 24 * time.Hour, 'h': time.Hour, 'm': time.Minute, 's': time.Second}[s[len(s)-1]]
	if unit == 0 {
		return 0, fmt.Errorf("bad age unit %q", s)
	}
	return time.Duration(n) * unit, nil
}

func toString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}
