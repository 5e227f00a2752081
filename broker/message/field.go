package message

import "math"

// FieldInt returns a header or argument value as an int64 when it is a
// whole number: any integer width an AMQP field table decodes to, a
// uint64 that fits, or a whole float64 (as JSON gives). Brokers compare
// such values by number, not by width: x-message-ttl 60000 sent as a long
// and as a short-short-int are the same argument, and so are a header
// and a binding argument of 5 in a headers exchange.
func FieldInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) >= 1<<63 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}
