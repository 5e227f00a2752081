package forward

import (
	"encoding/binary"
	"fmt"

	"github.com/warrenmq/warren/broker/message"
	"github.com/warrenmq/warren/broker/queue"
)

// The consumer calls' framing.
//
//	forward.deliver  version(1) id(8) batch(8) count(4), then count times
//	                 seq(8) redelivered(1) len(4) message; the answer is
//	                 handed(8)
//	forward.credit   version(1) id(8) handed(8)
//
// batch numbers a consumer's deliver calls from 0 (several are in flight:
// the consumer's node hands their batches over in that order); handed is
// how many deliveries of an automatic-ack consumer its node has handed to
// the client so far, the owner's credit.

// maxEarlyBatches bounds the batches a consumer's node keeps while an
// earlier one is still on its way. The owner has maxDeliverCalls in
// flight, but the handlers of one node's calls run concurrently: later
// batches may be taken (and answered, and followed by more) while an
// earlier one waits to be scheduled. What they hold is bounded by the
// owner's window; this bounds a confused peer.
const maxEarlyBatches = 256

// deliverHeader is the size of a deliver request before its deliveries.
const deliverHeader = 1 + 8 + 8 + 4

// deliveryOverhead is a delivery's bytes besides its message.
const deliveryOverhead = 8 + 1 + 4

// appendDeliveries encodes a deliver request.
func appendDeliveries(b []byte, id, batch uint64, ds []queue.Delivery) []byte {
	b = append(b, wireVersion)
	b = binary.BigEndian.AppendUint64(b, id)
	b = binary.BigEndian.AppendUint64(b, batch)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ds)))
	for i := range ds {
		d := &ds[i]
		b = binary.BigEndian.AppendUint64(b, d.Seq)
		var r byte
		if d.Redelivered {
			r = 1
		}
		b = append(b, r)
		b = binary.BigEndian.AppendUint32(b, uint32(d.Msg.EncodedSize()))
		b = d.Msg.Encode(b)
	}
	return b
}

// deliveriesSize is the encoded size of a deliver request of ds.
func deliveriesSize(ds []queue.Delivery) int {
	n := deliverHeader
	for i := range ds {
		n += deliveryOverhead + ds[i].Msg.EncodedSize()
	}
	return n
}

// decodeDeliveries parses a deliver request; its messages alias b, and
// each delivery's Queue is q.
func decodeDeliveries(b []byte, q queue.Queue) (id, batch uint64, ds []queue.Delivery, err error) {
	if len(b) < 1 || b[0] != wireVersion {
		return 0, 0, nil, fmt.Errorf("%w: version", errMalformed)
	}
	d := decoder{b: b[1:]}
	id, batch = d.u64(), d.u64()
	n := d.u32()
	if d.err != nil {
		return 0, 0, nil, d.err
	}
	// Every delivery takes at least its fields and a message's minimal
	// encoding: no count may promise more than the bytes left (the
	// deliveries and messages allocated below are bounded by the request).
	if uint64(n)*(8+1+minEncodedMessage) > uint64(len(d.b)) {
		return 0, 0, nil, fmt.Errorf("%w: delivery count", errMalformed)
	}
	// The batch's messages in one allocation, sharing their exchange and
	// routing key strings where they are the same.
	ds = make([]queue.Delivery, n)
	slab := make([]message.Message, n)
	var like *message.Message
	for i := range ds {
		seq := d.u64()
		redelivered := d.u8() == 1
		raw := d.bytes(int(d.u32()))
		if d.err != nil {
			return 0, 0, nil, d.err
		}
		if err := message.DecodeInto(&slab[i], raw, like); err != nil {
			return 0, 0, nil, fmt.Errorf("forward: %w", err)
		}
		like = &slab[i]
		ds[i] = queue.Delivery{Msg: like, Queue: q, Seq: seq, Redelivered: redelivered}
	}
	return id, batch, ds, nil
}

// peekConsumer reads the consumer id of a deliver request without
// decoding its deliveries.
func peekConsumer(b []byte) (uint64, error) {
	if len(b) < 1 || b[0] != wireVersion {
		return 0, fmt.Errorf("%w: version", errMalformed)
	}
	d := decoder{b: b[1:]}
	id := d.u64()
	return id, d.err
}

func appendCredit(b []byte, id, handed uint64) []byte {
	b = append(b, wireVersion)
	b = binary.BigEndian.AppendUint64(b, id)
	return binary.BigEndian.AppendUint64(b, handed)
}

func decodeCredit(b []byte) (id, handed uint64, err error) {
	if len(b) < 1 || b[0] != wireVersion {
		return 0, 0, fmt.Errorf("%w: version", errMalformed)
	}
	d := decoder{b: b[1:]}
	id, handed = d.u64(), d.u64()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: trailing bytes", errMalformed)
	}
	return id, handed, d.err
}

// decodeHanded reads a deliver call's answer (an empty answer is 0).
func decodeHanded(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
