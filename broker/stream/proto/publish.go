package proto

import (
	"encoding/binary"
	"fmt"
)

// PublishedMessage is one entry of a Publish frame. Entry holds the bytes
// as they go into a chunk: for a simple message a uint32 size (high bit
// clear) and the message; for a sub-entry batch its type byte (high bit set,
// compression in bits 4-6), record count (uint16), uncompressed size, data
// size (uint32) and data. Records is 1 for a simple message.
type PublishedMessage struct {
	PublishingID uint64
	// Filter is the v2 filter value ("" when null or v1).
	Filter  string
	Entry   []byte
	Records int
}

// Body is a simple message's bytes (nil for a sub-entry batch).
func (m *PublishedMessage) Body() []byte {
	if m.Records != 1 || len(m.Entry) < 4 || m.Entry[0]&0x80 != 0 {
		return nil
	}
	return m.Entry[4:]
}

// SimpleEntry builds the entry bytes of a single message.
func SimpleEntry(body []byte) []byte {
	e := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(e, uint32(len(body)))
	return append(e, body...)
}

// Publish carries messages of one publisher. Version 2 adds a filter value
// per message.
type Publish struct {
	Version     uint16
	PublisherID uint8
	Messages    []PublishedMessage
}

func (c *Publish) Key() uint16 { return KeyPublish }
func (c *Publish) version() uint16 {
	if c.Version == 0 {
		return 1
	}
	return c.Version
}
func (c *Publish) appendFields(b []byte) []byte {
	b = appendU32(append(b, c.PublisherID), uint32(len(c.Messages)))
	for _, m := range c.Messages {
		b = appendU64(b, m.PublishingID)
		if c.version() >= 2 {
			if m.Filter == "" {
				b = appendU16(b, 0xFFFF)
			} else {
				b = appendStr(b, m.Filter)
			}
		}
		b = append(b, m.Entry...)
	}
	return b
}
func (c *Publish) decodeFields(r *reader, version uint16) {
	c.Version = version
	c.PublisherID = r.u8()
	n := r.count(12)
	c.Messages = c.Messages[:0]
	for range n {
		m := PublishedMessage{PublishingID: r.u64()}
		if version >= 2 {
			m.Filter = r.str()
		}
		m.Entry, m.Records = r.entry()
		if r.err != nil {
			return
		}
		c.Messages = append(c.Messages, m)
	}
}

// entry reads one chunk entry (simple or sub-entry batch) and returns its
// bytes and record count.
func (r *reader) entry() ([]byte, int) {
	if len(r.b) < 1 {
		r.fail("entry")
		return nil, 0
	}
	start := r.b
	if r.b[0]&0x80 == 0 {
		n := r.u32()
		r.bytes(int(n))
		if r.err != nil {
			return nil, 0
		}
		return start[: 4+int(n) : 4+int(n)], 1
	}
	r.u8()
	recs := r.u16()
	r.u32() // uncompressed size
	n := r.u32()
	if n > 1<<31 {
		r.fail("sub-entry size")
		return nil, 0
	}
	r.bytes(int(n))
	if r.err != nil {
		return nil, 0
	}
	if recs == 0 {
		r.fail("sub-entry batch (no records)")
		return nil, 0
	}
	l := 11 + int(n)
	return start[:l:l], int(recs)
}

// DecodePublish decodes a Publish body (as returned by ReadFrame) into p,
// reusing p.Messages; message entries alias body.
func DecodePublish(body []byte, p *Publish) error {
	r := reader{b: body}
	key, ver := r.u16(), r.u16()
	if r.err == nil && key != KeyPublish {
		return fmt.Errorf("%w: key %d is not publish", ErrMalformed, key)
	}
	if r.err == nil && (ver < 1 || ver > 2) {
		return fmt.Errorf("%w: publish version %d", ErrUnknownCommand, ver)
	}
	p.decodeFields(&r, ver)
	return r.end()
}

// PublishConfirm confirms publishing ids of one publisher.
type PublishConfirm struct {
	PublisherID   uint8
	PublishingIDs []uint64
}

func (c *PublishConfirm) Key() uint16 { return KeyPublishConfirm }
func (c *PublishConfirm) appendFields(b []byte) []byte {
	b = appendU32(append(b, c.PublisherID), uint32(len(c.PublishingIDs)))
	for _, id := range c.PublishingIDs {
		b = appendU64(b, id)
	}
	return b
}
func (c *PublishConfirm) decodeFields(r *reader, _ uint16) {
	c.PublisherID = r.u8()
	n := r.count(8)
	for range n {
		c.PublishingIDs = append(c.PublishingIDs, r.u64())
	}
}

// AppendPublishConfirm appends a whole confirm frame without building a
// PublishConfirm.
func AppendPublishConfirm(b []byte, publisherID uint8, ids []uint64) []byte {
	b, start := beginFrame(b, KeyPublishConfirm, 1)
	b = appendU32(append(b, publisherID), uint32(len(ids)))
	for _, id := range ids {
		b = appendU64(b, id)
	}
	return finishFrame(b, start)
}

// PublishingError is one refused message.
type PublishingError struct {
	PublishingID uint64
	Code         uint16
}

// PublishError refuses messages of one publisher.
type PublishError struct {
	PublisherID uint8
	Errors      []PublishingError
}

func (c *PublishError) Key() uint16 { return KeyPublishError }
func (c *PublishError) appendFields(b []byte) []byte {
	b = appendU32(append(b, c.PublisherID), uint32(len(c.Errors)))
	for _, e := range c.Errors {
		b = appendU16(appendU64(b, e.PublishingID), e.Code)
	}
	return b
}
func (c *PublishError) decodeFields(r *reader, _ uint16) {
	c.PublisherID = r.u8()
	n := r.count(10)
	for range n {
		c.Errors = append(c.Errors, PublishingError{PublishingID: r.u64(), Code: r.u16()})
	}
}
