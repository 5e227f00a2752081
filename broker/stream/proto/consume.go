package proto

import "encoding/binary"

// Subscribe starts a subscription with an offset specification, initial
// credit and properties (name, single-active-consumer, super-stream,
// filter.N, match-unfiltered).
type Subscribe struct {
	CorrelationID  uint32
	SubscriptionID uint8
	Stream         string
	Offset         OffsetSpec
	Credit         uint16
	Properties     map[string]string
}

func (c *Subscribe) Key() uint16 { return KeySubscribe }
func (c *Subscribe) appendFields(b []byte) []byte {
	b = appendStr(append(appendU32(b, c.CorrelationID), c.SubscriptionID), c.Stream)
	b = appendU16(appendOffsetSpec(b, c.Offset), c.Credit)
	if len(c.Properties) > 0 {
		b = appendStrMap(b, c.Properties)
	}
	return b
}
func (c *Subscribe) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.SubscriptionID, c.Stream = r.u32(), r.u8(), r.str()
	c.Offset, c.Credit = r.offsetSpec(), r.u16()
	if len(r.b) > 0 {
		c.Properties = r.strMap()
	}
}

// Deliver carries one chunk (header and entries, as stored) to a
// subscription. Version 2 adds the stream's committed chunk id.
type Deliver struct {
	Version          uint16
	SubscriptionID   uint8
	CommittedChunkID uint64
	Chunk            []byte
}

func (c *Deliver) Key() uint16 { return KeyDeliver }
func (c *Deliver) version() uint16 {
	if c.Version == 0 {
		return 1
	}
	return c.Version
}
func (c *Deliver) appendFields(b []byte) []byte {
	b = append(b, c.SubscriptionID)
	if c.version() >= 2 {
		b = appendU64(b, c.CommittedChunkID)
	}
	return append(b, c.Chunk...)
}
func (c *Deliver) decodeFields(r *reader, version uint16) {
	c.Version = version
	c.SubscriptionID = r.u8()
	if version >= 2 {
		c.CommittedChunkID = r.u64()
	}
	if len(r.b) < ChunkHeaderSize {
		r.fail("chunk header")
		return
	}
	// A delivered chunk is its header and data (no filter, no trailer):
	// the data size in the header must match the frame.
	if n := binary.BigEndian.Uint32(r.b[36:40]); uint64(n) != uint64(len(r.b)-ChunkHeaderSize) {
		r.fail("chunk (data size does not match frame)")
		return
	}
	c.Chunk = r.bytes(len(r.b))
}

// ChunkHeaderSize is the size of an osiris chunk header.
const ChunkHeaderSize = 48

// DeliverHeaderSize is the size of a deliver frame before the chunk.
func DeliverHeaderSize(version uint16) int {
	if version >= 2 {
		return 4 + 4 + 1 + 8
	}
	return 4 + 4 + 1
}

// AppendDeliverHeader appends a deliver frame's size, key, version,
// subscription id (and committed chunk id for v2) for a chunk of chunkLen
// bytes, which the caller writes next, unchanged.
func AppendDeliverHeader(b []byte, version uint16, subID uint8, committed uint64, chunkLen int) []byte {
	size := uint32(DeliverHeaderSize(version) - 4 + chunkLen)
	b = appendU16(appendU16(appendU32(b, size), KeyDeliver), version)
	b = append(b, subID)
	if version >= 2 {
		b = appendU64(b, committed)
	}
	return b
}

// Credit gives a subscription more chunks.
type Credit struct {
	SubscriptionID uint8
	Credit         uint16
}

func (c *Credit) Key() uint16 { return KeyCredit }
func (c *Credit) appendFields(b []byte) []byte {
	return appendU16(append(b, c.SubscriptionID), c.Credit)
}
func (c *Credit) decodeFields(r *reader, _ uint16) { c.SubscriptionID, c.Credit = r.u8(), r.u16() }

// CreditResponse is sent only when a credit fails (unknown subscription).
type CreditResponse struct {
	Code           uint16
	SubscriptionID uint8
}

func (c *CreditResponse) Key() uint16 { return KeyCredit | ResponseBit }
func (c *CreditResponse) appendFields(b []byte) []byte {
	return append(appendU16(b, c.Code), c.SubscriptionID)
}
func (c *CreditResponse) decodeFields(r *reader, _ uint16) {
	c.Code, c.SubscriptionID = r.u16(), r.u8()
}

// StoreOffset records a consumer's offset (no response).
type StoreOffset struct {
	Reference string
	Stream    string
	Offset    uint64
}

func (c *StoreOffset) Key() uint16 { return KeyStoreOffset }
func (c *StoreOffset) appendFields(b []byte) []byte {
	return appendU64(appendStr(appendStr(b, c.Reference), c.Stream), c.Offset)
}
func (c *StoreOffset) decodeFields(r *reader, _ uint16) {
	c.Reference, c.Stream, c.Offset = r.str(), r.str(), r.u64()
}

// QueryOffset asks for a consumer's stored offset.
type QueryOffset struct {
	CorrelationID uint32
	Reference     string
	Stream        string
}

func (c *QueryOffset) Key() uint16 { return KeyQueryOffset }
func (c *QueryOffset) appendFields(b []byte) []byte {
	return appendStr(appendStr(appendU32(b, c.CorrelationID), c.Reference), c.Stream)
}
func (c *QueryOffset) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Reference, c.Stream = r.u32(), r.str(), r.str()
}

// QueryOffsetResponse carries the offset (code NoOffset when none).
type QueryOffsetResponse struct {
	CorrelationID uint32
	Code          uint16
	Offset        uint64
}

func (c *QueryOffsetResponse) Key() uint16 { return KeyQueryOffset | ResponseBit }
func (c *QueryOffsetResponse) appendFields(b []byte) []byte {
	return appendU64(appendU16(appendU32(b, c.CorrelationID), c.Code), c.Offset)
}
func (c *QueryOffsetResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code, c.Offset = r.u32(), r.u16(), r.u64()
}

// Unsubscribe ends a subscription.
type Unsubscribe struct {
	CorrelationID  uint32
	SubscriptionID uint8
}

func (c *Unsubscribe) Key() uint16 { return KeyUnsubscribe }
func (c *Unsubscribe) appendFields(b []byte) []byte {
	return append(appendU32(b, c.CorrelationID), c.SubscriptionID)
}
func (c *Unsubscribe) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.SubscriptionID = r.u32(), r.u8()
}

// ConsumerUpdate tells a single-active-consumer subscription whether it is
// active (server to client).
type ConsumerUpdate struct {
	CorrelationID  uint32
	SubscriptionID uint8
	Active         bool
}

func (c *ConsumerUpdate) Key() uint16 { return KeyConsumerUpdate }
func (c *ConsumerUpdate) appendFields(b []byte) []byte {
	a := byte(0)
	if c.Active {
		a = 1
	}
	return append(append(appendU32(b, c.CorrelationID), c.SubscriptionID), a)
}
func (c *ConsumerUpdate) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.SubscriptionID, c.Active = r.u32(), r.u8(), r.u8() != 0
}

// ConsumerUpdateResponse is the client's answer: where an activated
// consumer starts.
type ConsumerUpdateResponse struct {
	CorrelationID uint32
	Code          uint16
	Offset        OffsetSpec
}

func (c *ConsumerUpdateResponse) Key() uint16 { return KeyConsumerUpdate | ResponseBit }
func (c *ConsumerUpdateResponse) appendFields(b []byte) []byte {
	return appendOffsetSpec(appendU16(appendU32(b, c.CorrelationID), c.Code), c.Offset)
}
func (c *ConsumerUpdateResponse) decodeFields(r *reader, _ uint16) {
	c.CorrelationID, c.Code, c.Offset = r.u32(), r.u16(), r.offsetSpec()
	if !c.Offset.hasValue() {
		// rstream sends an offset value with every type (0 after next);
		// RabbitMQ ignores what follows a type that takes none.
		r.b = nil
	}
}
