package client

import (
	"encoding/binary"

	"github.com/warrenmq/warren/broker/stream/proto"
)

// DataMessage encodes body as an AMQP 1.0 message with one data section,
// the form the stream clients read.
func DataMessage(body []byte) []byte {
	b := []byte{0x00, 0x53, 0x75}
	if len(body) < 256 {
		b = append(b, 0xa0, byte(len(body)))
	} else {
		b = append(b, 0xb0)
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	}
	return append(b, body...)
}

// PublishFrame appends a publish frame (v1) of publisher pub holding n
// copies of msg (an encoded message) with publishing ids first, first+1, ...
func PublishFrame(dst []byte, pub uint8, first uint64, n int, msg []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, proto.KeyPublish)
	dst = binary.BigEndian.AppendUint16(dst, 1)
	dst = append(dst, pub)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	for i := range n {
		dst = binary.BigEndian.AppendUint64(dst, first+uint64(i))
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(msg)))
		dst = append(dst, msg...)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ChunkInfo is what a consumer needs from a delivered chunk's header.
type ChunkInfo struct {
	ChunkID    uint64
	NumRecords uint32
	NumEntries uint16
	Timestamp  int64
	DataLen    uint32
}

// ParseChunk reads a delivered chunk's header (ok false if too short).
func ParseChunk(chunk []byte) (ChunkInfo, bool) {
	if len(chunk) < proto.ChunkHeaderSize {
		return ChunkInfo{}, false
	}
	return ChunkInfo{
		NumEntries: binary.BigEndian.Uint16(chunk[2:4]),
		NumRecords: binary.BigEndian.Uint32(chunk[4:8]),
		Timestamp:  int64(binary.BigEndian.Uint64(chunk[8:16])),
		ChunkID:    binary.BigEndian.Uint64(chunk[24:32]),
		DataLen:    binary.BigEndian.Uint32(chunk[36:40]),
	}, true
}
