package forward

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/queue"
)

// errMalformed is a request or answer that is not this package's encoding.
var errMalformed = errors.New("forward: malformed message")

const wireVersion = 1

// maxBatchGroups bounds the groups of one publish request.
const maxBatchGroups = 1 << 16

// group is the publishes of one call for one queue.
type group struct {
	vhost, queue string
	msgs         []*message.Message
}

// publishVersion is the first byte of a publish request (wireVersion
// was the request that carried an epoch and a sequence number: calls are
// ordered by the transport now).
const publishVersion = 2

// appendPublishes encodes a publish request: version(1), then per run of
// items for one queue vhost(2+n) queue(2+n) count(4), then count times
// len(4)+message.
func appendPublishes(b []byte, items []item) []byte {
	b = append(b, publishVersion)
	for i := 0; i < len(items); {
		q := items[i].q
		j := i + 1
		for j < len(items) && items[j].q == q {
			j++
		}
		b = appendString(b, q.info.Vhost)
		b = appendString(b, q.info.Name)
		b = binary.BigEndian.AppendUint32(b, uint32(j-i))
		for _, it := range items[i:j] {
			b = binary.BigEndian.AppendUint32(b, uint32(it.p.Msg.EncodedSize()))
			b = it.p.Msg.Encode(b)
		}
		i = j
	}
	return b
}

// minEncodedMessage is the fewest bytes a message takes in a publish
// request: its length (4) and message.Encode's header (27), empty
// exchange and key (1+1) and props length (4).
const minEncodedMessage = 4 + 27 + 1 + 1 + 4

// publishes is a decoded publish request.
type publishes struct {
	groups []group
	total  int
}

// decodePublishes parses a publish request. A request of one group (one
// queue: the usual call) is its messages' bytes, aliased (the handler
// owns req); a request of several has each group's bytes copied into a
// buffer of its own, so a message a queue keeps pins its own queue's part.
func decodePublishes(b []byte) (publishes, error) {
	if len(b) < 1 || b[0] != publishVersion {
		return publishes{}, fmt.Errorf("%w: version", errMalformed)
	}
	d := decoder{b: b[1:]}
	var p publishes
	var groups []group
	total := 0
	for len(d.b) > 0 {
		if len(groups) >= maxBatchGroups {
			return publishes{}, fmt.Errorf("%w: too many groups", errMalformed)
		}
		g := group{vhost: d.string(), queue: d.string()}
		n := d.u32()
		if d.err != nil {
			return publishes{}, d.err
		}
		// Every message takes at least its 4-byte length and the smallest
		// encoding: no count may promise more than the bytes left (so the
		// messages allocated below are bounded by the request's size).
		if uint64(n)*minEncodedMessage > uint64(len(d.b)) {
			return publishes{}, fmt.Errorf("%w: message count", errMalformed)
		}
		// The group's messages are copied into one buffer of their own
		// (one allocation a group, not a message): a message its queue
		// keeps in memory pins its group's bytes, not the whole request
		// (up to MaxBatchBytes) nor other queues' messages. A request of
		// one group is that group's bytes: its messages alias it.
		span := d.b
		for k := uint32(0); k < n; k++ {
			d.bytes(int(d.u32()))
		}
		if d.err != nil {
			return publishes{}, d.err
		}
		md := decoder{b: span[:len(span)-len(d.b)]}
		if len(groups) > 0 || len(d.b) > 0 {
			md.b = append([]byte(nil), md.b...)
		}
		// One allocation for the group's messages, their exchange and key
		// strings shared while they repeat.
		g.msgs = make([]*message.Message, n)
		slab := make([]message.Message, n)
		var like *message.Message
		for k := range slab {
			raw := md.bytes(int(md.u32()))
			if err := message.DecodeInto(&slab[k], raw, like); err != nil {
				return publishes{}, fmt.Errorf("forward: %w", err)
			}
			like = &slab[k]
			g.msgs[k] = like
		}
		total += int(n)
		groups = append(groups, g)
	}
	p.groups, p.total = groups, total
	return p, nil
}

// queueRef is the request of a one-queue operation: vhost(2+n) queue(2+n)
// then the operation's own fields.
func appendQueueRef(b []byte, vhost, name string) []byte {
	return appendVersionedQueueRef(b, wireVersion, vhost, name)
}

// appendVersionedQueueRef is appendQueueRef for a request of its own
// version (requestVersion).
func appendVersionedQueueRef(b []byte, version byte, vhost, name string) []byte {
	b = append(b, version)
	return appendString(appendString(b, vhost), name)
}

// decodeQueueRef reads a queue reference after its version byte (which
// the handler checked: versioned).
func decodeQueueRef(b []byte) (vhost, name string, d decoder, err error) {
	if len(b) < 1 {
		return "", "", d, fmt.Errorf("%w: version", errMalformed)
	}
	d = decoder{b: b[1:]}
	vhost, name = d.string(), d.string()
	return vhost, name, d, d.err
}

func appendStats(b []byte, st queue.Stats) []byte {
	for _, v := range []uint64{uint64(st.Ready), uint64(st.Unacked), uint64(st.Consumers), uint64(st.ReadyBytes), uint64(st.UnackedBytes), st.Published, st.Delivered, st.Acked} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func decodeStats(b []byte) (queue.Stats, error) {
	d := decoder{b: b}
	st := queue.Stats{Ready: int(d.u32of64()), Unacked: int(d.u32of64()), Consumers: int(d.u32of64()), ReadyBytes: int64(d.u63()), UnackedBytes: int64(d.u63()), Published: d.u64(), Delivered: d.u64(), Acked: d.u64()}
	return st, d.err
}

// appendSeqs encodes an op(1) and sequence numbers (settlement).
func appendSeqs(b []byte, op byte, seqs []uint64) []byte {
	b = append(b, op)
	b = binary.BigEndian.AppendUint32(b, uint32(len(seqs)))
	for _, s := range seqs {
		b = binary.BigEndian.AppendUint64(b, s)
	}
	return b
}

func (d *decoder) seqs() (byte, []uint64) {
	op := d.u8()
	n := d.u32()
	if d.err != nil {
		return 0, nil
	}
	if uint64(n)*8 > uint64(len(d.b)) {
		d.err = fmt.Errorf("%w: sequence count", errMalformed)
		return 0, nil
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = d.u64()
	}
	return op, out
}

// appendDelivery encodes a basic.get answer: found(1), then seq(8)
// redelivered(1) remaining(4) message(rest).
func appendDelivery(b []byte, d queue.Delivery, ok bool) []byte {
	if !ok {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, d.Seq)
	var r byte
	if d.Redelivered {
		r = 1
	}
	b = append(b, r)
	b = binary.BigEndian.AppendUint32(b, uint32(d.Remaining))
	return d.Msg.Encode(b)
}

func decodeDelivery(b []byte) (queue.Delivery, bool, error) {
	d := decoder{b: b}
	if d.u8() == 0 {
		return queue.Delivery{}, false, d.err
	}
	dl := queue.Delivery{Seq: d.u64(), Redelivered: d.u8() == 1, Remaining: int(d.u32())}
	if d.err != nil {
		return queue.Delivery{}, false, d.err
	}
	m, err := message.Decode(d.b)
	if err != nil {
		return queue.Delivery{}, false, fmt.Errorf("forward: %w", err)
	}
	dl.Msg = m
	return dl, true, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// decoder reads big-endian fields; the first short read sets err and every
// later read returns zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("%w: short", errMalformed)
		return false
	}
	return true
}

func (d *decoder) u8() byte {
	if !d.need(1) {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// u32of64 is a count sent as 8 bytes, clamped to 32 bits (no peer makes
// an int overflow).
func (d *decoder) u32of64() uint64 {
	v := d.u64()
	if v > 1<<31-1 {
		v = 1<<31 - 1
	}
	return v
}

func (d *decoder) u63() uint64 { return d.u64() &^ (1 << 63) }

func (d *decoder) bytes(n int) []byte {
	if !d.need(n) {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	if !d.need(2) {
		return ""
	}
	n := int(binary.BigEndian.Uint16(d.b))
	d.b = d.b[2:]
	return string(d.bytes(n))
}
